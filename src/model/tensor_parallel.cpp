#include "model/tensor_parallel.h"

#include <string>

namespace llmrt {
namespace {

using W = DecoderWeight;

Status uneven(int tp, const char* field, int64_t value, const std::string& want) {
  return invalidArgument("tensor_parallel_size " + std::to_string(tp) + ": " + field + " " + std::to_string(value) +
                         " " + want + "; choose a tensor_parallel_size that divides it");
}

// Rank r's share [r * n / tp, (r + 1) * n / tp) of n, shifted by `offset`.
IndexRange share(int64_t n, int tp, int rank, int64_t offset = 0) {
  return {offset + rank * (n / tp), offset + (rank + 1) * (n / tp)};
}

}  // namespace

Result<TensorParallelPlan> planTensorParallel(const ModelConfig& c, int tp) {
  if (tp < 1) return invalidArgument("tensor_parallel_size " + std::to_string(tp) + "; expected at least 1");
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  if (nh % tp != 0) return uneven(tp, "num_attention_heads", nh, "is not a multiple of it");
  if (nkv >= tp ? nkv % tp != 0 : tp % nkv != 0)
    return uneven(tp, "num_key_value_heads", nkv, "neither divides it nor is a multiple of it");
  if (c.intermediate_size % tp != 0) return uneven(tp, "intermediate_size", c.intermediate_size, "is not a multiple of it");
  if (c.decoder.num_experts > 0 && c.decoder.moe_intermediate_size % tp != 0)
    return uneven(tp, "moe_intermediate_size", c.decoder.moe_intermediate_size, "is not a multiple of it");
  if (c.decoder.shared_expert_intermediate_size % tp != 0)
    return uneven(tp, "shared_expert_intermediate_size", c.decoder.shared_expert_intermediate_size,
                  "is not a multiple of it");
  if (c.vocab_size % tp != 0) return uneven(tp, "vocab_size", c.vocab_size, "is not a multiple of it");
  TensorParallelPlan p;
  p.tp = tp;
  p.q_heads = nh / tp;
  p.kv_replicated = nkv < tp;
  p.kv_heads = p.kv_replicated ? 1 : nkv / tp;
  p.vocab = c.vocab_size / tp;
  return p;
}

WeightShard weightShard(const TensorParallelPlan& p, const ModelConfig& c, DecoderWeight w, int rank) {
  const int tp = p.tp;
  const int64_t hd = c.head_dim, Q = c.qSize(), KV = c.kvSize(), I = c.intermediate_size;
  // The rank's query heads, and the KV heads they use (head h uses KV head h / (heads per KV head)).
  const int64_t q0 = rank * p.q_heads;
  const int64_t kv0 = q0 / (c.num_attention_heads / c.num_key_value_heads);
  const IndexRange q{q0 * hd, (q0 + p.q_heads) * hd}, kv{kv0 * hd, (kv0 + p.kv_heads) * hd};
  auto gated = [&](int64_t inter, int64_t base) -> std::vector<IndexRange> {  // [gate | up] rows of one MLP
    return {share(inter, tp, rank, base), share(inter, tp, rank, base + inter)};
  };
  switch (w) {
    case W::kQkv:
    case W::kQkvBias:
      return {ShardAxis::kRows, {q, {Q + kv.begin, Q + kv.end}, {Q + KV + kv.begin, Q + KV + kv.end}}};
    case W::kO:
      return {ShardAxis::kCols, {q}};
    case W::kUp:
    case W::kUpBias:
      if (c.decoder.mlp_gated) return {ShardAxis::kRows, gated(I, 0)};
      return {ShardAxis::kRows, {share(I, tp, rank)}};
    case W::kDown:
      return {ShardAxis::kCols, {share(I, tp, rank)}};
    case W::kExpertsGateUp: {
      const int64_t m = c.decoder.moe_intermediate_size;
      WeightShard s{ShardAxis::kRows, {}};
      for (int64_t e = 0; e < c.decoder.num_experts; ++e)
        for (const IndexRange& r : gated(m, e * 2 * m)) s.ranges.push_back(r);
      return s;
    }
    case W::kExpertsDown:
      return {ShardAxis::kCols, {share(c.decoder.moe_intermediate_size, tp, rank)}};
    case W::kSharedUp:
      return {ShardAxis::kRows, gated(c.decoder.shared_expert_intermediate_size, 0)};
    case W::kSharedDown:
      return {ShardAxis::kCols, {share(c.decoder.shared_expert_intermediate_size, tp, rank)}};
    case W::kLmHead:
    case W::kLmHeadBias:
      return {ShardAxis::kRows, {share(c.vocab_size, tp, rank)}};
    default:
      return {};  // the embedding, norms and their biases, o / down biases, learned positions, routers, the shared gate
  }
}

}  // namespace llmrt
