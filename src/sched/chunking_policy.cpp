#include "sched/chunking_policy.h"

#include <algorithm>

namespace llmrt {
namespace {

// The largest chunk from `pos` toward `target` that fits `budget` and ends on a
// block boundary unless it reaches the target.
int32_t alignedChunk(int32_t pos, int32_t target, int32_t budget, int32_t tpb) {
  const int32_t remaining = target - pos;
  if (remaining <= budget) return remaining;
  const int32_t end = (pos + budget) / tpb * tpb;
  return std::max(0, end - pos);
}

}  // namespace

int32_t chunkAlignment(int32_t tokens_per_block, int32_t context_budget) {
  // Chunks end on block boundaries (so each step leaves only full blocks behind, stored for
  // reuse at once), except when the step's budget for context tokens is smaller than a block:
  // no chunk from a boundary could reach the next one, and a prompt would wait for as long as
  // generation tokens take that part of the budget (with max_num_tokens <= tokens_per_block:
  // while anything generates; with max_num_tokens < tokens_per_block: for ever). Chunks are
  // then cut anywhere; a block completed by a later chunk is stored then.
  return context_budget < tokens_per_block ? 1 : std::max(1, tokens_per_block);
}

void assignChunks(const ChunkingOptions& o, std::span<ChunkCandidate> cands, int32_t& budget) {
  for (ChunkCandidate& c : cands) c.chunk = 0;
  if (budget <= 0) return;
  const int32_t tpb = chunkAlignment(o.tokens_per_block, budget);
  if (!o.enable_chunking || o.policy == ContextChunkingPolicy::kFirstComeFirstServed) {
    for (ChunkCandidate& c : cands) {
      const int32_t remaining = c.target - c.computed;
      if (remaining <= 0) continue;
      if (!o.enable_chunking && remaining <= o.max_num_tokens) {
        if (remaining > budget) break;  // whole contexts only, in arrival order
        c.chunk = remaining;
      } else {
        c.chunk = alignedChunk(c.computed, c.target, budget, tpb);
      }
      budget -= c.chunk;
      if (budget <= 0) break;
    }
    return;
  }
  // EQUAL_PROGRESS.
  bool progress = true;
  while (progress && budget > 0) {
    progress = false;
    for (ChunkCandidate& c : cands) {
      const int32_t pos = c.computed + c.chunk;
      if (pos >= c.target) continue;
      const int32_t next = std::min(c.target, pos / tpb * tpb + tpb);
      const int32_t d = next - pos;
      if (d > budget) continue;
      c.chunk += d;
      budget -= d;
      progress = true;
    }
  }
}

}  // namespace llmrt
