// The ranks beyond rank 0 of a tensor-parallel engine (EngineConfig::tensor_parallel_size > 1):
// each rank's backend and model (DecoderModelOptions::comm), and a thread per rank that runs its
// forward of every step when rank 0's runs, on the same step inputs. Rank 0 stays with the
// ModelRunner, which samples from its logits (every rank holds the same gathered logits).
//
// Per step: 1. start(inputs, layout) wakes every peer (the inputs must stay valid until wait());
// 2. rank 0 runs its own forward on the caller's thread (its collectives meet the peers');
// 3. wait() returns once every peer is done, with the first peer's error. A rank that fails
// aborts the group's communicators (abort()), so no rank waits forever in a collective.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/comm/communicator.h"
#include "model/decoder_model.h"

namespace llmrt {

class PeerRanks {
 public:
  struct Rank {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<DecoderModel> model;
  };
  // `comms`: the group's communicators, rank 0's first (kept for abort()); `ranks`: ranks 1.. .
  PeerRanks(std::vector<std::unique_ptr<Communicator>> comms, std::vector<Rank> ranks);
  ~PeerRanks();
  PeerRanks(const PeerRanks&) = delete;
  PeerRanks& operator=(const PeerRanks&) = delete;

  void start(const StepInputs& inputs, const StepLayout& layout);
  Status wait();
  // Fails every rank's waiting and later collectives (a failed step).
  void abort(const Status& why);
  // The KV block copies of a step, on every peer's pools (rank 0's are the runner's).
  Status copyKvBlocks(std::span<const KvBlockCopy> copies);

 private:
  void loop(size_t peer);

  std::vector<std::unique_ptr<Communicator>> comms_;  // (outlive the ranks' models, which point at them)
  std::vector<Rank> ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t step_ = 0;       // steps started
  size_t running_ = 0;      // peers still in the current step
  bool stop_ = false;
  const StepInputs* inputs_ = nullptr;
  const StepLayout* layout_ = nullptr;
  Status error_;            // the current step's first peer error
  std::vector<std::thread> threads_;
};

}  // namespace llmrt
