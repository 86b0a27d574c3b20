// The per-row types of Backend::sampleRows: plain C++17 structs, so the CUDA
// kernels (cuda_sampling.cu) read them as they are uploaded.
#pragma once

#include <cstdint>

namespace llmrt {

// One logits row's controls: the semantics of llmrt/sampling_params.h, steps 1-7,
// with the sequence's penalty and mask lists resolved by the caller (kernels
// know nothing of requests).
struct RowSampling {
  bool greedy = true;               // argmax (ties: lowest id); the truncation fields are ignored
  float temperature = 1.0f;         // > 0 when !greedy
  int32_t top_k = 0;                // 0 or >= vocab: off
  float top_p = 1.0f;               // (0, 1]
  float min_p = 0.0f;               // [0, 1]
  float repetition_penalty = 1.0f;  // applied to every listed token
  float presence_penalty = 0.0f;    // applied to listed tokens with generated_count > 0
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;                // Philox key (core/philox.h)
  uint64_t step = 0;                // tokens the sequence has generated
  uint32_t sample_index = 0;
  int32_t num_logprobs = -1;        // -1: none; else the chosen token's logprob and this many top ones
  int32_t penalty_begin = 0;        // [begin, begin + count) of the step's PenaltyToken list
  int32_t penalty_count = 0;
  int32_t mask_begin = 0;           // [begin, begin + count) of the step's masked ids (set to -inf
  int32_t mask_count = 0;           // after the penalties: min_tokens)
  // Overlapped steps: >= 0 when the sequence generated one more token than its penalty list
  // holds, still on the backend as row `pending_src` of the previous step's result (what fed
  // tokens read); the penalties count it as generated once more (Backend::sampleRowsAsync).
  int32_t pending_src = -1;
};

// A distinct token of a sequence's prompt or output (for the penalties) or of its logit_bias.
struct PenaltyToken {
  int32_t token = 0;
  int32_t generated_count = 0;  // occurrences in the generated text
  int32_t in_prompt = 0;        // 1 when it occurs in the prompt
  float bias = 0.0f;            // logit_bias, added after the penalties
};

// What sampleRows returns for one row.
struct RowSample {
  static constexpr int kMaxTop = 20;  // SamplingParams::kMaxLogprobs
  enum Error : int32_t { kOk = 0, kBadValue = 1, kAllMasked = 2 };
  int32_t token = -1;
  int32_t error = kOk;    // kBadValue: logits[bad_index] (after penalties) is bad_value, a NaN or +inf
  int32_t bad_index = -1;
  float bad_value = 0.0f;
  float logprob = 0.0f;   // log_softmax of the processed logits at `token` (when num_logprobs >= 0)
  int32_t rank = 0;       // 1 + tokens with a strictly larger logit
  int32_t num_top = 0;    // min(num_logprobs, vocab)
  int32_t top_ids[kMaxTop] = {};  // logprob descending, ties: lower id first
  float top_logprobs[kMaxTop] = {};
};

}  // namespace llmrt
