// Context chunking: how a step's token budget is split among the sequences
// whose prompts are being computed. Chunks end on block boundaries (multiples
// of tokens_per_block in absolute positions), except a prompt's last chunk and
// steps whose context budget is smaller than a block.
#pragma once

#include <cstdint>
#include <span>

#include "llmrt/scheduler_config.h"

namespace llmrt {

struct ChunkCandidate {
  int32_t computed = 0;  // tokens whose KV exists
  int32_t target = 0;    // tokens to compute in all (the context length)
  int32_t chunk = 0;     // out: tokens to compute this step
};

struct ChunkingOptions {
  ContextChunkingPolicy policy = ContextChunkingPolicy::kFirstComeFirstServed;
  bool enable_chunking = true;
  int32_t tokens_per_block = 32;
  int32_t max_num_tokens = 8192;
};

// Fills `chunk` of each candidate (given in arrival order) and lowers `budget`.
//  - Without chunking a context runs whole in one step, in arrival order, and
//    waits while it does not fit what is left (only a context longer than
//    max_num_tokens, e.g. a resumed one, is chunked anyway).
//  - FIRST_COME_FIRST_SERVED: each candidate in order takes all it can.
//  - EQUAL_PROGRESS: rounds giving every unfinished candidate up to its next
//    block boundary until the budget is spent.
// `budget` on entry is the step's budget for context tokens (max_num_tokens less the
// generation tokens). Chunks end on block boundaries except a context's last one, and
// except when that budget is smaller than a block (then anywhere: no chunk from a
// boundary could reach the next one, and waiting would stall prompts for as long as
// generation takes part of every step's budget).
void assignChunks(const ChunkingOptions& options, std::span<ChunkCandidate> cands, int32_t& budget);

// The token multiple at which chunks end in a step whose context tokens may number
// `context_budget`: tokens_per_block, or 1 when the budget is smaller than a block.
int32_t chunkAlignment(int32_t tokens_per_block, int32_t context_budget);

}  // namespace llmrt
