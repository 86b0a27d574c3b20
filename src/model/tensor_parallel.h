// How a model's weights split over `tp` tensor-parallel ranks (Megatron's scheme, on the model's
// layout of decoder_weights.h): products whose outputs split are column-parallel (their rows:
// q/k/v by attention heads, gate|up and the experts' gate|up by intermediate features), products
// whose inputs split are row-parallel (their columns: o, down, the experts' down), the LM head is
// vocab-parallel (rows; a tied head is the rank's rows of the embedding), everything else (the
// embedding, norms, routers, the o / down biases, added once) is replicated. With fewer KV heads than ranks each KV head is
// replicated on the tp / num_key_value_heads ranks whose query heads use it.
//
// Uneven splits are refused with the field and its value: num_attention_heads, intermediate sizes
// and vocab_size must divide by tp, and num_key_value_heads must divide tp or be divisible by it.
#pragma once

#include <cstdint>
#include <vector>

#include "llmrt/model_config.h"
#include "llmrt/status.h"
#include "loader/decoder_weights.h"

namespace llmrt {

struct IndexRange {
  int64_t begin = 0, end = 0;  // [begin, end)
  int64_t size() const { return end - begin; }
};

enum class ShardAxis : uint8_t {
  kReplicated,  // every rank holds the whole weight
  kRows,        // the rank holds these rows (dim 0), in the order of `ranges`
  kCols,        // the rank holds these columns (dim 1) of every row
};

struct WeightShard {
  ShardAxis axis = ShardAxis::kReplicated;
  std::vector<IndexRange> ranges;  // the rank's indices along `axis`, concatenated in this order
};

struct TensorParallelPlan {
  int tp = 1;
  int64_t q_heads = 0;         // query heads per rank
  int64_t kv_heads = 0;        // KV heads per rank (1 when replicated)
  bool kv_replicated = false;  // num_key_value_heads < tp
  int64_t vocab = 0;           // LM head rows per rank
};

// The plan for `config` over `tp` ranks (tp >= 1), or an InvalidArgument naming the field that
// does not split evenly ("tensor_parallel_size 3: num_attention_heads 32 is not a multiple of 3").
Result<TensorParallelPlan> planTensorParallel(const ModelConfig& config, int tp);

// The part of weight `w` (decoderWeightShape) rank `rank` holds.
WeightShard weightShard(const TensorParallelPlan& plan, const ModelConfig& config, DecoderWeight w, int rank);

}  // namespace llmrt
