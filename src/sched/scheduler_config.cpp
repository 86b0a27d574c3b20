#include <algorithm>
#include <cctype>
#include <string>

#include "llmrt/scheduler_config.h"

namespace llmrt {

std::string_view toString(CapacitySchedulerPolicy p) {
  switch (p) {
    case CapacitySchedulerPolicy::kGuaranteedNoEvict:
      return "guaranteed_no_evict";
    case CapacitySchedulerPolicy::kMaxUtilization:
      return "max_utilization";
    case CapacitySchedulerPolicy::kStaticBatch:
      return "static_batch";
  }
  return "?";
}

std::string_view toString(ContextChunkingPolicy p) {
  switch (p) {
    case ContextChunkingPolicy::kFirstComeFirstServed:
      return "first_come_first_served";
    case ContextChunkingPolicy::kEqualProgress:
      return "equal_progress";
  }
  return "?";
}

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}
}  // namespace

std::optional<CapacitySchedulerPolicy> parseCapacitySchedulerPolicy(std::string_view name) {
  const std::string n = lower(name);
  for (auto p : {CapacitySchedulerPolicy::kGuaranteedNoEvict, CapacitySchedulerPolicy::kMaxUtilization,
                 CapacitySchedulerPolicy::kStaticBatch})
    if (n == toString(p)) return p;
  return std::nullopt;
}

Status SchedulerConfig::validate() const {
  if (!parseCapacitySchedulerPolicy(toString(capacity_scheduler_policy)))
    return fieldError("SchedulerConfig", "capacity_scheduler_policy",
                      std::to_string(static_cast<int>(capacity_scheduler_policy)),
                      "guaranteed_no_evict, max_utilization or static_batch");
  if (!parseContextChunkingPolicy(toString(context_chunking_policy)))
    return fieldError("SchedulerConfig", "context_chunking_policy",
                      std::to_string(static_cast<int>(context_chunking_policy)),
                      "first_come_first_served or equal_progress");
  return Status::ok();
}

std::optional<ContextChunkingPolicy> parseContextChunkingPolicy(std::string_view name) {
  const std::string n = lower(name);
  for (auto p : {ContextChunkingPolicy::kFirstComeFirstServed, ContextChunkingPolicy::kEqualProgress})
    if (n == toString(p)) return p;
  return std::nullopt;
}

}  // namespace llmrt
