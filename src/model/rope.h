// Rotary position embedding frequencies as HF transformers computes them
// (modeling_rope_utils): default, linear, dynamic NTK, llama3 and yarn.
#pragma once

#include <cstdint>
#include <vector>

#include "llmrt/model_config.h"

namespace llmrt {

struct RopeTable {
  std::vector<float> inv_freq;  // [rotary_dim / 2], float32 like HF's buffer
  float attention_scaling = 1.0f;
  int64_t rotary_dim = 0;
};

// Frequencies for a sequence whose longest position is seq_len - 1. Only
// dynamic NTK depends on seq_len (HF recomputes it when seq_len exceeds
// max_position_embeddings); for the others pass anything.
RopeTable computeRopeTable(const ModelConfig& config, int64_t seq_len);

// True when the table depends on the sequence length (dynamic NTK).
bool ropeDependsOnLength(const ModelConfig& config);

// ALiBi slopes of `num_heads` heads as BLOOM's build_alibi_tensor (and Baichuan, Falcon) make
// them: 2^(-8/c)^(h+1) for the c = 2^floor(log2 n) first heads, then the odd powers of
// 2^(-4/c) for the rest.
std::vector<float> alibiSlopes(int64_t num_heads);

}  // namespace llmrt
