// Collectives among the ranks of a tensor-parallel group (each rank a thread of this process with
// its own backend): all-reduce sum, all-gather, broadcast, barrier, over float32 buffers in the
// rank's memory.
//
// Contract:
//   1. every rank of a group calls the same collectives in the same order, each from its own
//      thread, with `count` equal on every rank (a mismatch is an error on every rank);
//   2. a collective returns once the rank's own buffers hold the result; the results are the same
//      bits on every rank (allReduceSum adds the ranks in rank order, so a run is reproducible and
//      every rank continues from identical values);
//   3. abort() (any thread) makes every waiting and later collective of the group fail, so one
//      rank's error cannot leave the others waiting forever.
// Implementations: SingleRankCommunicator (a group of one: nothing to exchange), the in-process
// group (in_process_communicator.h) for CPU ranks, and the CUDA ranks' group (makeCudaGroup,
// backend/cuda/cuda_communicator.h: custom kernels and NCCL, with collectives on device buffers).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "llmrt/status.h"

namespace llmrt {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // data[0..count) = the element-wise sum of every rank's data[0..count).
  virtual Status allReduceSum(float* data, int64_t count) = 0;
  // out[r * count + i] = rank r's in[i], for every rank r (out holds size() * count floats).
  virtual Status allGather(const float* in, int64_t count, float* out) = 0;
  // data[0..count) = rank `root`'s data[0..count).
  virtual Status broadcast(float* data, int64_t count, int root) = 0;
  // Returns once every rank has called it.
  virtual Status barrier() = 0;
  // Fails every waiting and later collective of the group with `why`.
  virtual void abort(const Status& why) = 0;
};

// A group of one: the collectives leave the data as it is (allGather copies in to out).
class SingleRankCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status allReduceSum(float* data, int64_t count) override;
  Status allGather(const float* in, int64_t count, float* out) override;
  Status broadcast(float* data, int64_t count, int root) override;
  Status barrier() override;
  void abort(const Status& why) override;

 private:
  Status aborted_;
};

// A collective that a backend enqueues on a device (its kernels wait on the device for the other
// ranks'), between enqueue fences when `fenced`: every rank meets the others on the host before
// `enqueue` and again after it. Why: a host thread that blocks in the driver (a kernel loaded at
// its first launch — cuBLASLt loads its kernels so — waits for its GPU, or for ranks sharing one
// the whole GPU, to go idle, holding a process-wide lock) must never wait for a collective whose
// peers are not all enqueued: the fence after makes every enqueued collective's peers enqueued
// before any rank goes on; the fence before keeps a rank from enqueueing the next collective while
// another still runs host work that may wait for the GPU. A step recorded into a graph is fenced
// around its launch instead (DecoderModel::forward).
Status fencedCollective(Communicator& comm, bool fenced, const std::function<Status()>& enqueue);

}  // namespace llmrt
