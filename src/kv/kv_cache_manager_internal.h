// Internal state of KvCacheManager shared by its implementation files.
#pragma once

#include <optional>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace llmrt {

struct KvCacheManager::Sequence {
  SequenceId id = 0;
  std::vector<TokenId> tokens;  // prompt, then appended tokens
  int32_t num_prompt = 0;           // tokens given to addSequence (allocatePromptTokens' limit)
  int32_t num_request_prompt = 0;   // of those, the request's prompt; the rest were generated (retention)
  int32_t max_new_tokens = 0;
  int32_t num_allocated = 0;
  int32_t num_computed = 0;
  int32_t num_reused = 0;
  std::vector<int32_t> blocks;  // block objects per logical block; detail::kNil once released by the window
  std::vector<BlockId> table;   // their primary slots (what the runner reads)
  int32_t first_held = 0;       // logical blocks below this were released by the window
  // Storing into the tree: blocks [0, num_stored) are tree blocks this
  // sequence holds (its own, reused ones, or an equal twin another sequence
  // stored first, which replaced the private copy in blocks/table); while
  // storing, store_parent is blocks[num_stored - 1] (the root when 0).
  int32_t num_stored = 0;
  int32_t store_parent = detail::kNil;
  uint32_t store_parent_gen = 0;
  bool storing = true;
  std::optional<KvCacheRetentionConfig> retention;  // ranges sorted by token_start
  SequenceKeyExtras extras;
};

struct KvCacheManager::Match {
  std::vector<int32_t> full;
  int32_t num_secondary = 0;
  detail::PartialMatch partial;
  int32_t reusable_tokens = 0;
};

}  // namespace llmrt
