#include "backend/comm/communicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "backend/comm/host_barrier.h"
#include "backend/comm/in_process_communicator.h"

namespace llmrt {

namespace {

Status checkCount(const char* what, int64_t count) {
  if (count < 0) return invalidArgument(std::string(what) + ": count " + std::to_string(count) + " is negative");
  return Status::ok();
}

}  // namespace

// ---- a group of one -------------------------------------------------------------------------

Status SingleRankCommunicator::allReduceSum(float*, int64_t count) {
  if (!aborted_.isOk()) return aborted_;
  return checkCount("allReduceSum", count);
}

Status SingleRankCommunicator::allGather(const float* in, int64_t count, float* out) {
  if (!aborted_.isOk()) return aborted_;
  LLMRT_RETURN_IF_ERROR(checkCount("allGather", count));
  if (in != out && count > 0) std::memmove(out, in, static_cast<size_t>(count) * sizeof(float));
  return Status::ok();
}

Status SingleRankCommunicator::broadcast(float*, int64_t count, int root) {
  if (!aborted_.isOk()) return aborted_;
  if (root != 0) return invalidArgument("broadcast: root " + std::to_string(root) + " of a group of 1");
  return checkCount("broadcast", count);
}

Status SingleRankCommunicator::barrier() { return aborted_; }

void SingleRankCommunicator::abort(const Status& why) { aborted_ = why.isOk() ? internalError("aborted") : why; }

Status fencedCollective(Communicator& comm, bool fenced, const std::function<Status()>& enqueue) {
  if (fenced) LLMRT_RETURN_IF_ERROR(comm.barrier());
  LLMRT_RETURN_IF_ERROR(enqueue());
  return fenced ? comm.barrier() : Status::ok();
}

// ---- the in-process group -------------------------------------------------------------------

namespace {

// What the ranks of a group share: a reusable barrier with abort, and each rank's posted buffers.
class Group {
 public:
  explicit Group(int size) : size_(size), barrier_(size), posts_(static_cast<size_t>(size)) {}
  int size() const { return size_; }
  Status arriveAndWait() { return barrier_.arriveAndWait(); }
  void abort(const Status& why) { barrier_.abort(why); }

  struct Post {
    const float* in = nullptr;
    float* out = nullptr;
    int64_t count = 0;
  };
  Post& post(int rank) { return posts_[static_cast<size_t>(rank)]; }

  // After a barrier: every rank posted the same count (else every rank reports it).
  Status sameCounts(const char* what) const {
    for (const Post& p : posts_)
      if (p.count != posts_.front().count)
        return invalidArgument(std::string(what) + ": ranks passed different counts (" +
                               std::to_string(posts_.front().count) + " and " + std::to_string(p.count) + ")");
    return Status::ok();
  }

 private:
  const int size_;
  HostBarrier barrier_;
  std::vector<Post> posts_;
};

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }

  // Each rank sums every rank's buffer in rank order into its scratch, then (after a barrier: no
  // one reads the buffers any more) copies the scratch into its own buffer: the same bits on every
  // rank.
  Status allReduceSum(float* data, int64_t count) override {
    LLMRT_RETURN_IF_ERROR(checkCount("allReduceSum", count));
    LLMRT_RETURN_IF_ERROR(exchange({data, data, count}, "allReduceSum"));
    const float* first = group_->post(0).in;
    scratch_.assign(first, first + count);  // (from rank 0's values, not 0.0f: -0.0f stays -0.0f)
    for (int r = 1; r < size(); ++r) {
      const float* in = group_->post(r).in;
      for (int64_t i = 0; i < count; ++i) scratch_[static_cast<size_t>(i)] += in[i];
    }
    LLMRT_RETURN_IF_ERROR(group_->arriveAndWait());
    if (count > 0) std::memcpy(data, scratch_.data(), static_cast<size_t>(count) * sizeof(float));
    return Status::ok();
  }

  Status allGather(const float* in, int64_t count, float* out) override {
    LLMRT_RETURN_IF_ERROR(checkCount("allGather", count));
    LLMRT_RETURN_IF_ERROR(exchange({in, out, count}, "allGather"));
    for (int r = 0; r < size(); ++r)
      if (count > 0)
        std::memcpy(out + static_cast<int64_t>(r) * count, group_->post(r).in, static_cast<size_t>(count) * sizeof(float));
    return group_->arriveAndWait();  // (the inputs may change only once every rank has copied them)
  }

  Status broadcast(float* data, int64_t count, int root) override {
    LLMRT_RETURN_IF_ERROR(checkCount("broadcast", count));
    if (root < 0 || root >= size()) {
      const Status bad = invalidArgument("broadcast: root " + std::to_string(root) + " of a group of " +
                                         std::to_string(size()));
      group_->abort(bad);
      return bad;
    }
    LLMRT_RETURN_IF_ERROR(exchange({data, data, count}, "broadcast"));
    if (rank_ != root && count > 0)
      std::memcpy(data, group_->post(root).in, static_cast<size_t>(count) * sizeof(float));
    return group_->arriveAndWait();
  }

  Status barrier() override { return group_->arriveAndWait(); }
  void abort(const Status& why) override { group_->abort(why); }

 private:
  // Posts this rank's buffers and waits for every rank's; checks the counts agree.
  Status exchange(const Group::Post& p, const char* what) {
    group_->post(rank_) = p;
    LLMRT_RETURN_IF_ERROR(group_->arriveAndWait());
    return group_->sameCounts(what);
  }

  std::shared_ptr<Group> group_;
  int rank_;
  std::vector<float> scratch_;
};

}  // namespace

Result<std::vector<std::unique_ptr<Communicator>>> makeInProcessGroup(int size) {
  if (size < 1 || size > 1024)
    return invalidArgument("communicator group of " + std::to_string(size) + " ranks; expected 1 to 1024");
  auto group = std::make_shared<Group>(size);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<InProcessCommunicator>(group, r));
  return ranks;
}

}  // namespace llmrt
