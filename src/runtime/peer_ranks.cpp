#include "runtime/peer_ranks.h"

#include <string>

namespace llmrt {

PeerRanks::PeerRanks(std::vector<std::unique_ptr<Communicator>> comms, std::vector<Rank> ranks)
    : comms_(std::move(comms)), ranks_(std::move(ranks)) {
  for (size_t p = 0; p < ranks_.size(); ++p) threads_.emplace_back([this, p] { loop(p); });
}

PeerRanks::~PeerRanks() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void PeerRanks::start(const StepInputs& inputs, const StepLayout& layout) {
  std::lock_guard<std::mutex> lock(mu_);
  inputs_ = &inputs;
  layout_ = &layout;
  error_ = Status::ok();
  running_ = ranks_.size();
  ++step_;
  cv_.notify_all();
}

Status PeerRanks::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return running_ == 0; });
  return error_;
}

void PeerRanks::abort(const Status& why) { comms_.front()->abort(why); }

Status PeerRanks::copyKvBlocks(std::span<const KvBlockCopy> copies) {
  for (size_t p = 0; p < ranks_.size(); ++p)
    LLMRT_RETURN_IF_ERROR(ranks_[p].backend->copyKvBlocks(copies).withContext("rank " + std::to_string(p + 1)));
  return Status::ok();
}

void PeerRanks::loop(size_t peer) {
  uint64_t seen = 0;
  const Status bound = ranks_[peer].backend->bindThread();  // (its device, for this thread's calls)
  for (;;) {
    const StepInputs* inputs = nullptr;
    const StepLayout* layout = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || step_ != seen; });
      if (stop_) return;
      seen = step_;
      inputs = inputs_;
      layout = layout_;
    }
    Result<TensorView> r = bound.isOk() ? ranks_[peer].model->forward(*inputs, *layout) : Result<TensorView>(bound);
    if (!r.isOk()) comms_.front()->abort(r.status());  // (releases ranks waiting in a collective)
    std::lock_guard<std::mutex> lock(mu_);
    if (!r.isOk() && error_.isOk()) error_ = r.status().withContext("rank " + std::to_string(peer + 1));
    if (--running_ == 0) cv_.notify_all();
  }
}

}  // namespace llmrt
