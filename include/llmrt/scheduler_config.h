// SchedulerConfig: how the in-flight batching scheduler picks the requests of
// each step, mirroring TensorRT-LLM's SchedulerConfig / CapacitySchedulerPolicy /
// ContextChunkingPolicy. A plain struct; validate() checks it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "llmrt/status.h"

namespace llmrt {

enum class CapacitySchedulerPolicy {
  // Admit a request only when KV blocks for its whole remaining length (prompt +
  // max_tokens) are guaranteed next to every admitted request: nothing is ever paused.
  kGuaranteedNoEvict,
  // Pack as many requests as fit the next step; when blocks run out, pause the
  // most recently started requests (blocks freed or left reusable) and resume them later.
  kMaxUtilization,
  // Form a batch and admit nothing new until every request of it has finished.
  kStaticBatch,
};

enum class ContextChunkingPolicy {
  kFirstComeFirstServed,  // all chunks of the earliest request first
  kEqualProgress,         // one chunk of every context request before the next chunk of any
};

struct SchedulerConfig {
  CapacitySchedulerPolicy capacity_scheduler_policy = CapacitySchedulerPolicy::kGuaranteedNoEvict;
  ContextChunkingPolicy context_chunking_policy = ContextChunkingPolicy::kFirstComeFirstServed;
  // Process a prompt over several steps in chunks (multiples of tokens_per_block,
  // except the last) so that generation keeps flowing and prompts longer than
  // max_num_tokens fit. When false, a prompt is computed in one step, so it must
  // not exceed max_num_tokens. (On by default here, unlike TensorRT-LLM: the
  // CPU backend's small max_num_tokens makes whole-prompt steps impractical.)
  bool enable_chunked_context = true;

  // OK, or an InvalidArgument naming a policy value outside its enum.
  Status validate() const;
};

// "guaranteed_no_evict", "max_utilization", "static_batch".
std::string_view toString(CapacitySchedulerPolicy policy);
// "first_come_first_served", "equal_progress".
std::string_view toString(ContextChunkingPolicy policy);
// Parses the names above (case-insensitive; "GUARANTEED_NO_EVICT" works too).
std::optional<CapacitySchedulerPolicy> parseCapacitySchedulerPolicy(std::string_view name);
std::optional<ContextChunkingPolicy> parseContextChunkingPolicy(std::string_view name);

}  // namespace llmrt
