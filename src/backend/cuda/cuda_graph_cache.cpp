#include "backend/cuda/cuda_graph_cache.h"

namespace llmrt {

cudaGraphExec_t GraphCache::find(uint64_t key) {
  if (graph_epoch_ != alloc_epoch_) {  // a buffer moved: every record is stale
    graphs_.clear();
    graph_epoch_ = alloc_epoch_;
  }
  auto it = graphs_.find(key);
  return it == graphs_.end() ? nullptr : it->second.get();
}

cudaGraphExec_t GraphCache::insert(uint64_t key, CudaGraphExec exec) {
  return graphs_.emplace(key, std::move(exec)).first->second.get();
}

}  // namespace llmrt
