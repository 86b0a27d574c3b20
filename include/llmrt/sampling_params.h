// SamplingParams: the per-request decoding controls, mirroring vLLM's /
// TensorRT-LLM's SamplingParams (field names as in vLLM's Python API).
// Implemented by the sampling layer (src/sampling, library llmrt_sampling).
//
// Semantics (what the sampler does with one sequence's logits each step):
//  1. Penalties on the raw logits.
//     - repetition_penalty (HF / CTRL style), over every distinct token id of the
//       prompt and of the generated text: logit > 0 ? logit / p : logit * p.
//     - frequency_penalty and presence_penalty (OpenAI style), over generated
//       tokens only: logit -= frequency_penalty * count + presence_penalty * (count > 0).
//     Applied in that order (repetition first), as vLLM does.
//     - logit_bias (OpenAI): a bias added to the listed ids' logits after the penalties
//       (-100 bans a token in practice, +100 forces it).
//  2. min_tokens: while fewer than min_tokens tokens have been generated, the
//     stop_token_ids and the model's EOS ids (unless ignore_eos) are masked to -inf.
//  3. Log-probabilities (when `logprobs` is set) are log_softmax of the logits
//     after steps 1-2 and BEFORE temperature / top-k / top-p / min-p: what the
//     model proposed once penalties are applied. (vLLM's default reports the
//     raw logits; ours differ from it only when penalties or min_tokens apply.)
//  4. Greedy when temperature < kGreedyTemperature (i.e. temperature == 0):
//     argmax, ties broken towards the lowest token id; steps 5-7 do not apply.
//  5. temperature: probabilities are softmax(logits / temperature), with the
//     exponential of src/sampling/kernels.h (Cephes expf, relative error < 2e-7).
//  6. Truncation, each stage renormalising over what the previous one kept.
//     Tokens are ordered by (logit descending, token id ascending), so ties
//     are always resolved towards the lower id.
//     - top_k > 0: keep the first top_k tokens in that order (0 = disabled;
//       a value >= the vocabulary size keeps everything; vLLM's -1 is rejected:
//       front ends map it to 0).
//     - top_p < 1: keep the shortest prefix of that order whose probability
//       mass is >= top_p (always at least one token).
//     - min_p > 0: keep tokens whose probability is >= min_p * (max probability).
//  7. Sampling from the renormalised kept set with a uniform u drawn from a
//     counter-based generator (Philox4x32-10) keyed by (seed, step, sample
//     index): the token is the first kept id, in ascending id order, at which
//     the cumulative probability exceeds u. A sample is thus a pure function of
//     (logits, params, seed, step, sample index): independent of batch
//     composition, of call order and of preemption / recomputation. (Another
//     backend using the same generator and exponential draws the same tokens
//     except where its summation order moves a boundary by a rounding error.)
//
// n > 1 asks for n independent sequences of one prompt; sequence i samples
// with the stream (seed, i). Greedy with n > 1 is allowed; all n are identical.
// Without a seed, a random one is drawn once per request (requestSeed() in
// src/sampling/sequence_state.h).
// Stop strings are carried here and checked by the runtime on detokenized text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "llmrt/status.h"

namespace llmrt {

struct SamplingParams {
  // Largest accepted `logprobs` (number of top alternatives), as OpenAI's API.
  static constexpr int kMaxLogprobs = 20;
  // Largest |bias| of logit_bias, as OpenAI's API.
  static constexpr float kMaxLogitBias = 100.0f;
  // Largest accepted `n`.
  static constexpr int kMaxN = 128;
  // Presence / frequency penalties must lie in [-kMaxAbsPenalty, kMaxAbsPenalty] (OpenAI).
  static constexpr float kMaxAbsPenalty = 2.0f;
  // A temperature below this samples greedily (vLLM's _SAMPLING_EPS).
  static constexpr float kGreedyTemperature = 1e-5f;

  int n = 1;                        // independent sequences for this prompt, in [1, kMaxN]
  float temperature = 1.0f;         // >= 0; 0 = greedy
  int top_k = 0;                    // >= 0; 0 = disabled
  float top_p = 1.0f;               // (0, 1]; 1 = disabled
  float min_p = 0.0f;               // [0, 1]; 0 = disabled
  float repetition_penalty = 1.0f;  // > 0; 1 = disabled
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  std::optional<uint64_t> seed;     // none = a random seed per request

  int max_tokens = 16;                  // >= 1: most tokens generated per sequence
  int min_tokens = 0;                   // [0, max_tokens]: stop / EOS ids are masked until this many
  bool ignore_eos = false;              // EOS ids neither stop nor get masked
  std::vector<int32_t> stop_token_ids;  // extra ids that end a sequence (each in [0, vocab))
  std::vector<std::string> stop;        // stop strings (non-empty), checked by the runtime
  // (token id, bias) pairs with distinct ids in [0, vocab), biases finite in [-kMaxLogitBias, kMaxLogitBias].
  std::vector<std::pair<int32_t, float>> logit_bias;
  bool include_stop_str_in_output = false;

  // Log-probabilities: none = not reported; k >= 0 reports the chosen token's
  // logprob plus the k most likely alternatives (0 = chosen token only), k <= kMaxLogprobs.
  std::optional<int> logprobs;
  bool skip_special_tokens = true;  // detokenization option, carried for the runtime

  // Checks every field; `vocab_size` (> 0) bounds stop_token_ids — without it (a front end
  // checking its flags before any model is loaded) those ids are only checked to be >= 0.
  // Returns InvalidArgument naming the field, its value and the allowed range, e.g.
  //   "SamplingParams: field 'top_p' has value 1.5; expected a number in (0, 1]".
  Status validate(std::optional<int64_t> vocab_size = std::nullopt) const;

  bool isGreedy() const { return temperature < kGreedyTemperature; }
  bool usesRepetitionPenalty() const { return repetition_penalty != 1.0f; }
  bool usesOutputPenalties() const { return presence_penalty != 0.0f || frequency_penalty != 0.0f; }
  bool usesPenalties() const { return usesRepetitionPenalty() || usesOutputPenalties(); }
  bool usesLogitBias() const { return !logit_bias.empty(); }
};

}  // namespace llmrt
