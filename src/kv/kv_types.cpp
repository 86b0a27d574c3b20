#include "kv/kv_types.h"

namespace llmrt {

std::string_view kvPoolName(KvPool pool) { return pool == KvPool::kPrimary ? "primary" : "secondary"; }

std::string_view kvAllocStatusMessage(KvAllocStatus status) {
  switch (status) {
    case KvAllocStatus::kOk:
      return "OK";
    case KvAllocStatus::kNoFreeBlocks:
      return "Can't allocate new blocks. No free blocks left";
  }
  return "?";
}

Status toStatus(KvAllocStatus status) {
  if (status == KvAllocStatus::kOk) return Status::ok();
  return resourceExhausted(std::string(kvAllocStatusMessage(status)));
}

}  // namespace llmrt
