// ModelRunner: one engine step. Takes the sequences the scheduler planned (each
// with its cached count, its block table and how many tokens to compute), runs the
// block copies the plan carries, runs the model on the packed batch and samples
// the next token where one is due. It reads the plan only: the KV cache manager
// is the scheduler's (the runner marks nothing computed). Knows nothing of
// requests, streaming or text.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_types.h"
#include "llmrt/sampling_params.h"
#include "model/decoder_model.h"
#include "runtime/device_sampling.h"
#include "runtime/forward_batch.h"
#include "runtime/peer_ranks.h"
#include "runtime/step_builder.h"
#include "sampling/sampler.h"
#include "sampling/sequence_state.h"

namespace llmrt {

struct StepSequence {
  SequenceId id = 0;
  std::span<const TokenId> tokens;  // every token of the sequence so far (prompt + generated)
  int32_t num_cached = 0;           // tokens whose KV is in the cache: computed are [num_cached, + num_compute)
  int32_t num_compute = 0;          // tokens to compute
  std::span<const BlockId> block_table;  // covers [0, num_cached + num_compute)
  bool sample = false;              // sample a token from the last computed position
  bool return_logits = false;       // copy the logits of every computed position (context logits)
  bool return_last_logits = false;  // copy the logits of the sampled position (generation logits)
  const SamplingParams* params = nullptr;      // required when sample
  const SequenceSamplingState* state = nullptr;  // required when sample
  // Overlapped steps: the last of `tokens` is a placeholder for the token the previous launch
  // samples, which only the backend has yet (it is fed from there). Such a sequence computes
  // that one token (the scheduler marks its KV computed once the token is known).
  bool fed_last = false;
};

struct StepSequenceResult {
  bool sampled = false;
  SampleResult sample;
  std::vector<float> logits;       // [computed rows, vocab] when return_logits
  std::vector<float> last_logits;  // [vocab] of the sampled position when return_last_logits
  Status error;               // a per-sequence failure (e.g. NaN logits); others continue
};

class ModelRunner {
 public:
  // `peers`: a tensor-parallel engine's other ranks (model and backend are rank 0's); every step's
  // forward and KV block copies run on them too.
  ModelRunner(DecoderModel& model, Backend& backend, std::vector<TokenId> eos_ids, PeerRanks* peers = nullptr);

  // Runs one step to completion: launch(seqs, copies, false) then collect(). Fails as a whole
  // only when the model or the KV copies fail.
  Result<std::vector<StepSequenceResult>> step(std::span<const StepSequence> seqs,
                                               std::span<const KvBlockCopy> copies = {});

  // Launches one step. With `allow_async`, a step that returns no logits and whose sampled rows
  // are all plain greedy (argmax) or sampled by the backend leaves its tokens on the backend and
  // returns before they are back (launchedAsync()): the next step may be launched at once,
  // feeding those tokens to its fed_last sequences on the backend. A fed_last sequence with
  // penalties counts its pending token there too (RowSampling::pending_src); where the host
  // samples it, the previous launch's token is waited for first. Any other step runs to
  // completion here. Each launch's results come from one collect() call, in launch order; at
  // most two launches are uncollected.
  // `copies` (the plan's KV block copies) run first, in order.
  Status launch(std::span<const StepSequence> seqs, std::span<const KvBlockCopy> copies, bool allow_async);
  bool launchedAsync() const { return !pending_.empty() && pending_.back().async; }
  // The results of the oldest uncollected launch (waits for them). A row whose argmax failed
  // (NaN or +inf logits) in an async step reports an error: its logits are gone.
  Result<std::vector<StepSequenceResult>> collect();
  // Drops every uncollected launch (after a failure); waits for nothing.
  void abandon() {
    pending_.clear();
    fed_rows_.clear();
  }

 private:
  // Greedy with no penalty, no min_tokens mask in force and no logprobs: the
  // argmax of the raw logits is the token.
  static bool plainGreedy(const StepSequence& s);
  // What a step's rows need from sampling.
  struct StepNeeds {
    bool all_greedy = true;      // every sampled row plainGreedy and no logits wanted: the argmax will do
    bool logits_wanted = false;  // context or generation logits go back to the caller
  };
  static StepNeeds needsOf(std::span<const StepSequence> seqs);

  struct Launched {
    bool async = false;
    bool sampled = false;                      // async: sampleRowsAsync (else argmaxRowsAsync)
    uint64_t ticket = 0;                       // async: the backend's result
    std::vector<int64_t> sample_row;           // async: per sequence, its result row (-1: not sampled)
    DeviceSamplingBatch rows;                  // async sampled: the rows, then their results
    int64_t vocab = 0;
    std::vector<StepSequenceResult> results;   // sync: the finished results
  };
  // The synchronous tail of launch: sampling and logits for a step whose forward has run.
  // pending_src[i]: sequence i's fed_last source row in the previous launch's result (else -1).
  Result<std::vector<StepSequenceResult>> finishSync(std::span<const StepSequence> seqs, const ForwardBatch& batch,
                                                     const TensorView& logits, std::span<const int64_t> first_row,
                                                     std::span<const int32_t> pending_src);
  // The token the previous (uncollected, async) launch sampled at result row `src` (waits for it).
  Result<int32_t> previousToken(int32_t src);

  DecoderModel& model_;
  Backend& backend_;
  PeerRanks* peers_ = nullptr;
  StepBuilder step_builder_;  // positions, slots, padding of each step
  std::vector<TokenId> eos_ids_;
  Sampler sampler_;
  std::vector<float> host_logits_;  // this step's logits, copied from the backend
  std::vector<int32_t> argmax_;     // this step's greedy tokens, from Backend::argmaxRows
  DeviceSamplingBatch device_sampling_;  // this step's rows for Backend::sampleRows
  std::deque<Launched> pending_;  // uncollected launches, oldest first
  // The last launch, when async: each sampled sequence's result row, sorted by id (what fed_last
  // and pending penalty tokens read; a vector reused from step to step, no allocation per row).
  std::vector<std::pair<SequenceId, int32_t>> fed_rows_;
  std::vector<int32_t> collected_ids_;
};

}  // namespace llmrt
