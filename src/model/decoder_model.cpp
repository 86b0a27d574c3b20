#include "model/decoder_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iterator>
#include <optional>

#include "backend/weight_parts.h"
#include "core/fp8.h"
#include "core/int8.h"
#include "core/logging.h"
#include "core/thread_pool.h"
#include "loader/arch_table.h"
#include "loader/kv_cache_scales.h"
#include "model/tensor_parallel.h"

namespace llmrt {
namespace {

// The codes of rows dequantized as float(code) * scale (float32), given each row's scale: v / scale
// is within a few units of float32 rounding of the code, so rounding recovers it exactly (int8:
// to the nearest integer, -128..127; F8_E4M3: to the nearest float8). A zero scale gives zeros.
void recodeRows(const TensorView& rows, const std::vector<float>& row_scales, DType code_type, uint8_t* codes,
                float* scales) {
  const int64_t n = rows.shape[0], cols = rows.shape[1];
  const auto* v = static_cast<const float*>(rows.data);
  std::vector<float> q(static_cast<size_t>(cols));
  for (int64_t i = 0; i < n; ++i) {
    const float s = row_scales[static_cast<size_t>(i)];
    scales[i] = s;
    for (int64_t j = 0; j < cols; ++j) q[static_cast<size_t>(j)] = s != 0.0f ? v[i * cols + j] / s : 0.0f;
    uint8_t* out = codes + i * cols;
    if (code_type == DType::kI8) {
      for (int64_t j = 0; j < cols; ++j)
        out[j] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(std::nearbyint(q[static_cast<size_t>(j)]), -128.0f, 127.0f)));
    } else {
      convertFromF32(q.data(), out, DType::kF8E4M3, q.size());
    }
  }
}

// Columns [begin, begin + n) of a row-major 2-D view, as a strided view.
TensorView columns(const TensorView& t, int64_t begin, int64_t n) {
  TensorView v = t;
  v.data = static_cast<char*>(t.data) + begin * static_cast<int64_t>(dtypeSize(t.dtype));
  v.shape = Shape{t.shape[0], n};
  v.strides = Shape{t.strides[0], 1};
  return v;
}

}  // namespace

Result<std::unique_ptr<DecoderModel>> DecoderModel::load(const ModelConfig& config, const WeightSource& weights,
                                                         Backend& backend, const DecoderModelOptions& options) {
  const bool int8 = options.product_codes == DType::kI8;
  if (options.product_codes != DType::kF32 && options.product_codes != DType::kF8E4M3 && !int8)
    return invalidArgument("DecoderModelOptions: product_codes is " + std::string(dtypeName(options.product_codes)) +
                           "; expected F32 (none), F8_E4M3 or I8");
  if (options.product_codes != DType::kF32 && !backend.supportsQuantizedWeights(options.product_codes))
    return unimplemented(std::string("quantization ") + (int8 ? "int8" : "fp8") + ": backend " + backend.name() +
                         " has no " + (int8 ? "INT8" : "FP8") + " products; use quantization none");
  ModelConfig local = config;
  if (options.comm != nullptr && options.comm->size() > 1) {
    LLMRT_ASSIGN_OR_RETURN(const TensorParallelPlan plan, planTensorParallel(config, options.comm->size()));
    local.num_attention_heads = plan.q_heads;
    local.num_key_value_heads = plan.kv_heads;
    local.intermediate_size = config.intermediate_size / plan.tp;
    local.decoder.moe_intermediate_size = config.decoder.moe_intermediate_size / plan.tp;  // (each expert split)
    local.decoder.shared_expert_intermediate_size = config.decoder.shared_expert_intermediate_size / plan.tp;
  }
  std::unique_ptr<DecoderModel> m(new DecoderModel(local, backend));
  m->comm_ = options.comm;
  LLMRT_RETURN_IF_ERROR(m->loadWeights(config, weights, options));
  m->rope_ = computeRopeTable(config, config.max_position_embeddings);
  m->normed_dtype_ = m->act_dtype_ = backend.activationDtype();
  if (m->fusedRmsLayers()) {
    const DType qkv = m->layersInputDtype(&Layer::qkv_w), up = m->layersInputDtype(&Layer::up_w);
    if (qkv == up) m->normed_dtype_ = qkv;
    m->act_dtype_ = m->layersInputDtype(&Layer::down_w);
  }
  return m;
}

namespace {

// Rank's share of a weight given as `parts` (concatenated along dim 0 to `full`), as float32.
std::vector<float> shardRows(std::span<const TensorView> parts, const Shape& full, const WeightShard& shard,
                             Shape* shape) {
  const int64_t rows = full[0], cols = full.rank() >= 2 ? full[1] : 1;
  std::vector<float> all(static_cast<size_t>(rows * cols));
  int64_t at = 0;
  for (const TensorView& p : parts) {
    convertToF32(p.data, p.dtype, all.data() + at, static_cast<size_t>(p.numel()));
    at += p.numel();
  }
  std::vector<float> out;
  if (shard.axis == ShardAxis::kRows) {
    int64_t n = 0;
    for (const IndexRange& r : shard.ranges) {
      out.insert(out.end(), all.begin() + r.begin * cols, all.begin() + r.end * cols);
      n += r.size();
    }
    *shape = full;
    (*shape)[0] = n;
  } else {
    int64_t n = 0;
    for (const IndexRange& r : shard.ranges) n += r.size();
    out.reserve(static_cast<size_t>(rows * n));
    for (int64_t i = 0; i < rows; ++i)
      for (const IndexRange& r : shard.ranges)
        out.insert(out.end(), all.begin() + i * cols + r.begin, all.begin() + i * cols + r.end);
    *shape = Shape{rows, n};
  }
  return out;
}

// The checkpoint row scales (parts' rowScales, concatenated) of the shard shardRows makes of the
// parts: a row shard's rows, a column shard every row. Empty when a part has none.
std::vector<float> shardRowScales(const std::vector<std::vector<float>>& part_scales, const WeightShard& shard) {
  std::vector<float> all;
  for (const std::vector<float>& s : part_scales) {
    if (s.empty()) return {};
    all.insert(all.end(), s.begin(), s.end());
  }
  if (shard.axis != ShardAxis::kRows) return all;
  std::vector<float> out;
  for (const IndexRange& r : shard.ranges) out.insert(out.end(), all.begin() + r.begin, all.begin() + r.end);
  return out;
}

}  // namespace

Status DecoderModel::loadWeights(const ModelConfig& full, const WeightSource& weights,
                                 const DecoderModelOptions& options) {
  const ModelConfig& c = full;  // the checkpoint's shapes
  DecoderWeightReader reader(c, weights);
  std::optional<TensorParallelPlan> plan;
  if (comm_ != nullptr && comm_->size() > 1) {
    LLMRT_ASSIGN_OR_RETURN(plan, planTensorParallel(c, comm_->size()));
  }
  std::vector<float> shard_buf;
  using W = DecoderWeight;
  const bool quantized = options.product_codes != DType::kF32;
  auto coded = [&](W w) {
    return quantized && (w == W::kQkv || w == W::kO || w == W::kUp || w == W::kDown || w == W::kSharedUp ||
                         w == W::kSharedDown);
  };
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  const bool int4_layout = options.int4_products && c.weight_quantization == "awq" && !plan &&
                           !archEntry(c.arch).names.transposed;
  std::unique_ptr<ThreadPool> quantize_pool;  // 8-bit codes: rows quantized on every core
  if (quantized) quantize_pool = std::make_unique<ThreadPool>();
  // (A checkpoint may keep some matrices unquantized, AutoAWQ's modules_to_not_convert: those load as
  // they are.)
  const std::string_view prefix = archEntry(c.arch).names.optional_prefix;
  auto storedPlain = [&](W w, int64_t layer) {
    for (const std::string& n : decoderWeightTensors(w, c, layer))
      if (weights(n).isOk() || (!prefix.empty() && n.starts_with(prefix) && weights(n.substr(prefix.size())).isOk()))
        return true;
    return false;
  };
  auto int4 = [&](W w, int64_t layer) {
    return int4_layout &&
           (w == W::kQkv || w == W::kO || w == W::kUp || w == W::kDown || w == W::kSharedUp || w == W::kSharedDown) &&
           !storedPlain(w, layer);
  };
  // An AWQ matrix as its codes, scales and zero points, each rearranged as the matrix would be.
  auto loadInt4 = [&](W w, int64_t layer, const std::string& name, TensorView& out) -> Status {
    using C = DecoderWeightReader::AwqComponent;
    std::vector<uint8_t> q, z;
    std::vector<float> s;
    Shape code_shape, group_shape;
    for (const C part : {C::kCodes, C::kScales, C::kZeros}) {
      reader.setAwqComponent(part);
      Result<std::vector<TensorView>> ps = reader.parts(w, layer);
      reader.setAwqComponent(C::kDequantized);
      if (!ps.isOk()) return ps.status();
      // (The reader's components are contiguous: codes and zero points U8, scales F32.)
      const DType want = part == C::kScales ? DType::kF32 : DType::kU8;
      Shape shape{0, ps->empty() ? 0 : (*ps)[0].shape[1]};
      for (const TensorView& p : *ps) {
        if (p.dtype != want || !p.isContiguous() || p.shape.rank() != 2 || p.shape[1] != shape[1])
          return internalError("4-bit products: a component of " + name + " is not a contiguous " +
                               std::string(dtypeName(want)) + " matrix");
        shape[0] += p.shape[0];
      }
      auto concat = [&](auto& dst) {
        using E = typename std::decay_t<decltype(dst)>::value_type;
        dst.resize(static_cast<size_t>(shape.numel()));
        int64_t at = 0;
        for (const TensorView& p : *ps) {
          std::memcpy(dst.data() + at, p.data, static_cast<size_t>(p.numel()) * sizeof(E));
          at += p.numel();
        }
      };
      if (part == C::kScales) {
        concat(s);
        group_shape = shape;
      } else {
        concat(part == C::kCodes ? q : z);
        if (part == C::kCodes) code_shape = shape;
      }
    }
    const int64_t group = c.awq_group_size;
    LLMRT_ASSIGN_OR_RETURN(out, backend_.loadInt4Weight(TensorView(q.data(), DType::kU8, code_shape),
                                                        TensorView(s.data(), DType::kF32, group_shape),
                                                        TensorView(z.data(), DType::kU8, group_shape), group, name));
    return Status::ok();
  };
  // The code type of an FP8 or INT8 checkpoint's matrices (F32: none).
  const DType checkpoint_codes = c.weight_quantization == "int8"  ? DType::kI8
                                 : c.weight_quantization == "fp8" ? DType::kF8E4M3
                                                                  : DType::kF32;
  // Each weight of the description, as the reader lays it out, handed to the backend.
  auto load = [&](DecoderWeight w, int64_t layer, TensorView& out) -> Status {
    if (!decoderWeightPresent(w, c, layer)) return Status::ok();
    if (int4(w, layer)) return loadInt4(w, layer, decoderWeightName(w, layer), out);
    LLMRT_ASSIGN_OR_RETURN(std::vector<TensorView> parts, reader.parts(w, layer));
    const std::string name = decoderWeightName(w, layer);
    bool borrowable = reader.lastPartsBorrowable();
    // Each part's checkpoint row scales, where the products take the checkpoint's own codes (an
    // FP8 / INT8 checkpoint with per-tensor or per-row scales): those parts keep their codes.
    std::vector<std::vector<float>> kept(parts.size());
    if (coded(w) && options.product_codes == checkpoint_codes)
      for (size_t i = 0; i < parts.size(); ++i) kept[i] = reader.rowScales(parts[i]);
    if (plan) {
      const WeightShard shard = weightShard(*plan, c, w, comm_->rank());
      if (shard.axis != ShardAxis::kReplicated) {
        // Tensor parallelism: the rank's rows or columns, gathered into one float32 part (and the
        // row scales of its rows).
        LLMRT_ASSIGN_OR_RETURN(const Shape shape, fusedWeightShape(parts, name));
        Shape part_shape;
        shard_buf = shardRows(parts, shape, shard, &part_shape);
        parts = {TensorView(shard_buf.data(), DType::kF32, part_shape)};
        kept = {shardRowScales(kept, shard)};
        borrowable = false;
      }
    }
    if (!coded(w)) {
      LLMRT_ASSIGN_OR_RETURN(out, backend_.loadWeight(parts, name, borrowable));
      return Status::ok();
    }
    // 8-bit codes: the parts' rows quantized one after another into one [rows, in] matrix.
    LLMRT_ASSIGN_OR_RETURN(Shape shape, fusedWeightShape(parts, name));
    codes.resize(static_cast<size_t>(shape.numel()));
    scales.resize(static_cast<size_t>(shape[0]));
    int64_t row = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const TensorView& p = parts[i];
      if (!p.isContiguous()) return internalError("8-bit products: a part of " + name + " is not contiguous");
      if (!kept[i].empty())
        recodeRows(p, kept[i], options.product_codes, codes.data() + row * shape[1], scales.data() + row);
      else if (options.product_codes == DType::kI8)
        quantizeInt8Rows(p, reinterpret_cast<int8_t*>(codes.data()) + row * shape[1], scales.data() + row,
                         quantize_pool.get());
      else
        quantizeFp8Rows(p, codes.data() + row * shape[1], scales.data() + row, quantize_pool.get());
      row += p.shape[0];
    }
    LLMRT_ASSIGN_OR_RETURN(out, backend_.loadQuantizedWeight(TensorView(codes.data(), options.product_codes, shape),
                                                             TensorView(scales.data(), DType::kF32, Shape{shape[0]}),
                                                             name));
    return Status::ok();
  };
  LLMRT_RETURN_IF_ERROR(load(W::kEmbed, 0, embed_));
  LLMRT_RETURN_IF_ERROR(load(W::kPosEmbed, 0, pos_embed_));
  LLMRT_RETURN_IF_ERROR(load(W::kFinalNorm, 0, final_norm_));
  LLMRT_RETURN_IF_ERROR(load(W::kFinalNormBias, 0, final_norm_b_));
  lm_head_ = embed_;  // tied unless the checkpoint has its own
  vocab_rows_ = c.vocab_size;
  if (plan) {
    // A tied head: this rank's rows of the (replicated) embedding.
    vocab_rows_ = plan->vocab;
    const IndexRange rows = weightShard(*plan, c, W::kLmHead, comm_->rank()).ranges[0];
    lm_head_.data = static_cast<char*>(embed_.data) + rows.begin * embed_.strides[0] * dtypeSize(embed_.dtype);
    lm_head_.shape = Shape{vocab_rows_, c.hidden_size};
  }
  LLMRT_RETURN_IF_ERROR(load(W::kLmHead, 0, lm_head_));
  LLMRT_RETURN_IF_ERROR(load(W::kLmHeadBias, 0, lm_head_b_));
  layers_.resize(static_cast<size_t>(c.num_hidden_layers));
  // Progress: a line at most every second while loading, and one at the end.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_line = start;
  auto progress = [&](int64_t layers_done, bool done) {
    const Clock::time_point now = Clock::now();
    if (!done && now - last_line < std::chrono::seconds(1)) return;
    last_line = now;
    const double s = std::chrono::duration<double>(now - start).count();
    const double gib = static_cast<double>(backend_.weightBytes()) / double(1 << 30);
    LLMRT_LOG_INFO("%s weights: %lld/%lld layers, %s in %.2f s (%.2f GiB/s)", done ? "Loaded" : "Loading",
                   static_cast<long long>(layers_done), static_cast<long long>(c.num_hidden_layers),
                   formatBytes(backend_.weightBytes()).c_str(), s, s > 0 ? gib / s : 0.0);
  };
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    Layer& L = layers_[static_cast<size_t>(i)];
    const std::pair<W, TensorView*> table[] = {
        {W::kAttnNorm, &L.attn_norm}, {W::kAttnNormBias, &L.attn_norm_b}, {W::kQkv, &L.qkv_w},
        {W::kQkvBias, &L.qkv_b},      {W::kO, &L.o_w},                    {W::kOBias, &L.o_b},
        {W::kMlpNorm, &L.mlp_norm},   {W::kMlpNormBias, &L.mlp_norm_b},   {W::kPreMlpNorm, &L.pre_mlp_norm},
        {W::kUp, &L.up_w},            {W::kUpBias, &L.up_b},              {W::kDown, &L.down_w},
        {W::kDownBias, &L.down_b},    {W::kPostMlpNorm, &L.post_mlp_norm}, {W::kRouter, &L.router_w},
        {W::kExpertsGateUp, &L.experts_gate_up}, {W::kExpertsDown, &L.experts_down},
        {W::kSharedUp, &L.shared_up}, {W::kSharedDown, &L.shared_down}, {W::kSharedGate, &L.shared_gate}};
    for (const auto& [w, out] : table) LLMRT_RETURN_IF_ERROR(load(w, i, *out));
    L.window = c.slidingWindowForLayer(i).value_or(0);
    L.moe = c.moeLayer(i);
    progress(i + 1, false);
  }
  LLMRT_RETURN_IF_ERROR(backend_.finishWeights());  // copies still in flight land (or fail) here
  progress(c.num_hidden_layers, true);
  AttentionExtras extras;
  extras.logit_softcap = static_cast<float>(c.decoder.attn_logit_softcap);
  if (c.decoder.positions == PositionEncoding::kAlibi) {
    extras.alibi_slopes = alibiSlopes(c.num_attention_heads);
    for (float& s : extras.alibi_slopes) s = static_cast<float>(s * c.decoder.alibi_slope_multiplier);
    if (plan) {  // the rank's heads' slopes
      const auto q0 = static_cast<std::ptrdiff_t>(comm_->rank() * plan->q_heads);
      extras.alibi_slopes = std::vector<float>(extras.alibi_slopes.begin() + q0,
                                               extras.alibi_slopes.begin() + q0 + plan->q_heads);
    }
  }
  if (!extras.empty()) LLMRT_RETURN_IF_ERROR(backend_.setAttentionExtras(extras));
  // An FP8 KV cache's scales where the checkpoint has them.
  Result<std::vector<float>> kv_scales = checkpointKvCacheScales(full, weights);
  if (!kv_scales.isOk()) {
    if (options.fp8_kv_cache) return kv_scales.status();
    LLMRT_LOG_WARNING("%s (ignored: the KV cache is not FP8)", kv_scales.status().message().c_str());
  } else if (!kv_scales->empty()) {
    LLMRT_RETURN_IF_ERROR(backend_.setKvCacheScales(*kv_scales));
    if (options.fp8_kv_cache && (comm_ == nullptr || comm_->rank() == 0))
      LLMRT_LOG_INFO("[KvCache] FP8 K and V scales of %lld layers from the checkpoint",
                     static_cast<long long>(kv_scales->size() / 2));
  } else if (options.fp8_kv_cache && (comm_ == nullptr || comm_->rank() == 0)) {
    LLMRT_LOG_WARNING("[KvCache] FP8 cache with scale 1 for every layer: the checkpoint has no k_scale / v_scale "
                      "(llmrt quantize --kv-cache-scales writes them)");
  }
  std::vector<int32_t> windows;
  for (const Layer& L : layers_) windows.push_back(static_cast<int32_t>(std::min<int64_t>(L.window, INT32_MAX)));
  return setAttentionWindows(windows);
}

Status DecoderModel::setAttentionWindows(std::span<const int32_t> per_layer) {
  if (per_layer.size() != layers_.size())
    return fieldError("DecoderModel", "attention windows", std::to_string(per_layer.size()) + " values",
                      "one per layer (" + std::to_string(layers_.size()) + ")");
  bool full = per_layer.empty();
  int64_t widest = 0;
  for (size_t i = 0; i < per_layer.size(); ++i) {
    if (per_layer[i] < 0)
      return fieldError("DecoderModel", "attention window of layer " + std::to_string(i), std::to_string(per_layer[i]),
                        ">= 0 tokens (0 = full attention)");
    full = full || per_layer[i] == 0;
    widest = std::max<int64_t>(widest, per_layer[i]);
  }
  for (size_t i = 0; i < per_layer.size(); ++i) layers_[i].window = per_layer[i];
  step_window_ = full ? 0 : widest;
  return Status::ok();
}

// Activation buffers (backend scratch slots). Those that only feed products take the backend's
// activation dtype; the residual stream, q/k/v (rotated and attended in float32), the branch
// outputs that are normed before they are added, and the logits stay F32.
enum Slot : int {
  kX,          // residual stream [T, hidden]
  kNormed,     // normed input of a product [T, hidden]
  kQkv,        // [T, q + 2 kv]
  kAttnOut,    // [T, q]
  kUp,         // [T, 2 inter (gate | up) or inter]
  kAct,        // [T, inter]
  kLast,       // the logits rows of the residual stream [R, hidden]
  kLastNormed, // [R, hidden]
  kLogits,     // [R, vocab]
  kBranch,     // sandwich: an o / down output before its norm [T, hidden]
  kNormed2,    // parallel with two norms: the MLP's normed input [T, hidden]
  kRouterLogits,  // mixture of experts [T, num_experts]
  kSharedGate,    // the shared expert's gate [T, 1]
  kLocalLogits,   // tensor parallelism: the rank's vocabulary shard of the logits [R, vocab / tp]
  kNumSlots
};

bool DecoderModel::fusedRmsLayers() const {
  const DecoderDescription& d = config_.decoder;
  return d.norm == NormKind::kRmsNorm && d.residual == ResidualWiring::kSequential && d.num_experts == 0;
}

DType DecoderModel::layersInputDtype(TensorView Layer::*w) const {
  const DType act = backend_.activationDtype();
  if (layers_.empty()) return act;
  const DType first = backend_.productInputDtype(layers_.front().*w);
  for (const Layer& L : layers_)
    if (backend_.productInputDtype(L.*w) != first) return act;
  return first;
}

DType DecoderModel::slotDtype(int slot) const {
  switch (slot) {
    case kNormed:  // (the normed rows of the last position's logits are kLastNormed)
      return normed_dtype_;
    case kAct:
      return act_dtype_;
    case kAttnOut:
    case kUp:
    case kLastNormed:
    case kNormed2:
      return backend_.activationDtype();
    default:
      return DType::kF32;
  }
}

Status DecoderModel::reserveActivations(int64_t max_tokens, int64_t max_logit_rows) {
  const ModelConfig& c = config_;
  const int64_t T = max_tokens, R = max_logit_rows;
  const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.qSize(), KV = c.kvSize();
  const DecoderDescription& d = c.decoder;
  const int64_t SI = d.shared_expert_intermediate_size;
  const int64_t up = std::max(d.mlp_gated ? 2 * I : I, 2 * SI), act = std::max(I, SI);
  const ResidualWiring wiring = d.residual;
  const bool moe = d.num_experts > 0;
  const std::pair<int64_t, int64_t> shapes[kNumSlots] = {
      {T, H}, {T, H}, {T, Q + 2 * KV}, {T, Q}, {T, up}, {T, act}, {R, H}, {R, H}, {R, c.vocab_size},
      {wiring == ResidualWiring::kSandwich || SI > 0 ? T : 0, H}, {wiring == ResidualWiring::kParallelTwoNorms ? T : 0, H},
      {moe ? T : 0, d.num_experts}, {SI > 0 ? T : 0, 1}, {sharded() ? R : 0, vocab_rows_}};
  for (int slot = 0; slot < kNumSlots; ++slot) {
    if (shapes[slot].first == 0) continue;
    if (backend_.scratch(slot, shapes[slot].first, shapes[slot].second, slotDtype(slot)).data == nullptr)
      return resourceExhausted("cannot allocate activation buffer " + std::to_string(slot) + " [" +
                               std::to_string(shapes[slot].first) + ", " + std::to_string(shapes[slot].second) + "]");
  }
  return backend_.reserveWorkspace(T, std::max({H, up, Q}));
}

Result<TensorView> DecoderModel::forward(const StepInputs& in, const StepLayout& layout) {
  tp_error_ = Status::ok();
  Status begun = backend_.beginStep(in);
  // Device collectives are fenced (fence()): the ranks meet around each collective of a step run
  // op by op, and around a recorded step's launch.
  const bool device_collectives = sharded() && backend_.device() != Device::kCpu;
  fences_ = device_collectives && !layout.record;
  if (sharded()) {
    // Every rank begins the step before any enqueues a collective: beginStep may grow pinned
    // buffers, which waits for the whole GPU, and ranks sharing a GPU would wait for each other.
    // (This barrier is also the fence before a recorded step's launch.)
    if (begun.isOk())
      begun = comm_->barrier();
    else
      comm_->abort(begun);
  }
  LLMRT_RETURN_IF_ERROR(begun);
  if (layout.record) {
    backend_.recordOrReplay(static_cast<uint64_t>(layout.rows), [&] { run(layout.rows, layout.logit_rows); });
    fences_ = device_collectives;
    fence();
  } else {
    run(layout.rows, layout.logit_rows);
  }
  if (!tp_error_.isOk()) return tp_error_;
  if (layout.real_logit_rows == 0) return TensorView(nullptr, DType::kF32, Shape{0, config_.vocab_size});
  TensorView logits = backend_.scratch(8, layout.logit_rows, config_.vocab_size);
  logits.shape = Shape{layout.real_logit_rows, config_.vocab_size};
  return logits;
}

namespace {
const TensorView* optional(const TensorView& t) { return t.data != nullptr ? &t : nullptr; }
}  // namespace

void DecoderModel::norm(const TensorView& x, const TensorView& w, const TensorView& b, TensorView out) {
  const auto eps = static_cast<float>(config_.norm_eps);
  if (config_.decoder.norm == NormKind::kLayerNorm)
    backend_.layerNorm(x, w, optional(b), eps, out);
  else
    backend_.rmsNorm(x, w, eps, out);
}

void DecoderModel::attention(const Layer& L, int64_t layer, TensorView qkv, TensorView attn_out) {
  const ModelConfig& c = config_;
  const int64_t Q = c.qSize(), KV = c.kvSize();
  backend_.ropeAttention(layer, columns(qkv, 0, Q), columns(qkv, Q, KV), columns(qkv, Q + KV, KV), c.head_dim,
                         c.num_attention_heads, L.window, static_cast<float>(c.decoder.attention_scale), attn_out);
}

void DecoderModel::mlpActivation(const TensorView& up, TensorView act) {
  const DecoderDescription& d = config_.decoder;
  if (!d.mlp_gated)
    backend_.activation(d.activation, up, act);
  else if (d.activation == Activation::kSilu)
    backend_.siluMul(up, act);
  else
    backend_.gatedActivation(d.activation, up, act);
}

void DecoderModel::run(int64_t T, int64_t R) {
  const ModelConfig& c = config_;
  const DecoderDescription& d = c.decoder;
  const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.qSize(), KV = c.kvSize();
  auto buf = [&](int slot, int64_t rows, int64_t cols) { return backend_.scratch(slot, rows, cols, slotDtype(slot)); };
  TensorView x = buf(kX, T, H);
  TensorView h = buf(kNormed, T, H);
  TensorView qkv = buf(kQkv, T, Q + 2 * KV);
  TensorView attn_out = buf(kAttnOut, T, Q);

  backend_.embedding(embed_, x);
  if (d.embedding_multiplier != 1.0) backend_.scaleSoftcap(x, static_cast<float>(d.embedding_multiplier), 0.0f);
  if (pos_embed_.data != nullptr) backend_.addPositionEmbedding(pos_embed_, x);
  if (fusedRmsLayers()) {
    runFusedRmsLayers(x, h, qkv, attn_out, buf(kUp, T, d.mlp_gated ? 2 * I : I), buf(kAct, T, I));
  } else {
    for (size_t li = 0; li < layers_.size(); ++li) runLayer(layers_[li], static_cast<int64_t>(li), x, h, qkv, attn_out, T);
  }
  if (R == 0) return;
  TensorView last = buf(kLast, R, H);
  TensorView last_norm = buf(kLastNormed, R, H);
  TensorView logits = buf(kLogits, R, c.vocab_size);
  backend_.gatherLogitRows(x, last);
  norm(last, final_norm_, final_norm_b_, last_norm);
  if (!sharded()) {
    backend_.linear(last_norm, lm_head_, optional(lm_head_b_), logits);
  } else {
    // The rank's vocabulary shard, gathered from every rank into [R, vocab] (rank r's columns
    // [r * vocab / tp, (r + 1) * vocab / tp)).
    TensorView local = buf(kLocalLogits, R, vocab_rows_);
    backend_.linear(last_norm, lm_head_, optional(lm_head_b_), local);
    allGather(local, logits);
  }
  if (d.final_logit_softcap > 0) backend_.scaleSoftcap(logits, 1.0f, static_cast<float>(d.final_logit_softcap));
}

void DecoderModel::runFusedRmsLayers(TensorView x, TensorView h, TensorView qkv, TensorView attn_out, TensorView up,
                                     TensorView act) {
  // Residual stream x; h the normed input of each block. The o and down products add their
  // output to x (linearAdd: on CUDA inside the product, no temporary); each is chained to the
  // product of the next normed input (linearAddNormLinear, which may split the norm over the two).
  // With a communicator the chain is its primitives (the same bits) with x's all-reduce between
  // the residual product and the norm.
  const auto eps = static_cast<float>(config_.norm_eps);
  auto addNormLinear = [&](const TensorView& in, const TensorView& w1, const TensorView& b1, const TensorView& norm_w,
                           const TensorView& w2, const TensorView& b2, TensorView out) {
    if (comm_ == nullptr) {
      backend_.linearAddNormLinear(in, w1, optional(b1), x, norm_w, eps, h, w2, optional(b2), out);
      return;
    }
    rowParallelAdd(in, w1, b1, x);
    backend_.rmsNorm(x, norm_w, eps, h);
    backend_.linear(h, w2, optional(b2), out);
  };
  backend_.rmsNorm(x, layers_[0].attn_norm, eps, h);
  backend_.linear(h, layers_[0].qkv_w, optional(layers_[0].qkv_b), qkv);
  for (size_t li = 0; li < layers_.size(); ++li) {
    const Layer& L = layers_[li];
    attention(L, static_cast<int64_t>(li), qkv, attn_out);
    addNormLinear(attn_out, L.o_w, L.o_b, L.mlp_norm, L.up_w, L.up_b, up);
    mlpActivation(up, act);
    if (li + 1 < layers_.size()) {
      const Layer& next = layers_[li + 1];
      addNormLinear(act, L.down_w, L.down_b, next.attn_norm, next.qkv_w, next.qkv_b, qkv);
    } else {
      rowParallelAdd(act, L.down_w, L.down_b, x);
    }
  }
}

void DecoderModel::mlpAdd(const Layer& L, const TensorView& h, TensorView x, int64_t T) {
  const ModelConfig& c = config_;
  const DecoderDescription& d = c.decoder;
  auto buf = [&](int slot, int64_t cols) { return backend_.scratch(slot, T, cols, slotDtype(slot)); };
  if (!L.moe) {
    const int64_t I = c.intermediate_size;
    TensorView up = buf(kUp, d.mlp_gated ? 2 * I : I), act = buf(kAct, I);
    if (!d.mlp_gated) {  // (the backend may apply the activation in the product)
      backend_.linearActivation(d.activation, h, L.up_w, optional(L.up_b), up, act);
    } else {
      backend_.linear(h, L.up_w, optional(L.up_b), up);
      mlpActivation(up, act);
    }
    rowParallelAdd(act, L.down_w, L.down_b, x);
    return;
  }
  // Tensor parallelism: every expert (and the shared expert) is split by its intermediate
  // features, the router and the shared expert's gate replicated, so every rank routes alike and
  // adds its share of each chosen expert; as in rowParallelAdd, rank 0 adds to x, the others
  // to zeros, and x's all-reduce sums the shares.
  TensorView logits = buf(kRouterLogits, d.num_experts);
  backend_.linear(h, L.router_w, nullptr, logits);
  if (comm_ != nullptr && comm_->rank() != 0) backend_.scaleSoftcap(x, 0.0f, 0.0f);  // x = 0
  backend_.moeAdd(h, logits, L.experts_gate_up, L.experts_down,
                  MoeRouting{d.num_experts, d.experts_per_token, d.norm_topk_prob}, d.activation, x);
  if (L.shared_up.data != nullptr) {
    // Qwen2-MoE's shared expert, scaled by sigmoid(its gate) (HF adds it to the experts' sum).
    const int64_t SI = d.shared_expert_intermediate_size;
    TensorView up = buf(kUp, 2 * SI), act = buf(kAct, SI), out = buf(kBranch, c.hidden_size), gate = buf(kSharedGate, 1);
    backend_.linear(h, L.shared_up, nullptr, up);
    mlpActivation(up, act);
    backend_.linear(act, L.shared_down, nullptr, out);
    backend_.linear(h, L.shared_gate, nullptr, gate);
    backend_.sigmoidGatedAdd(out, gate, x);
  }
  if (comm_ != nullptr) allReduce(x);
}

void DecoderModel::collective(const Status& st) {
  if (st.isOk() || !tp_error_.isOk()) return;
  comm_->abort(st);  // (the other ranks must not wait for this one)
  tp_error_ = st;
}

void DecoderModel::fence() {
  if (fences_ && tp_error_.isOk()) collective(comm_->barrier());
}

void DecoderModel::allReduce(TensorView x) {
  collective(fencedCollective(*comm_, fences_ && tp_error_.isOk(), [&] { return backend_.allReduceSum(*comm_, x); }));
}

void DecoderModel::allGather(const TensorView& local, TensorView logits) {
  collective(fencedCollective(*comm_, fences_ && tp_error_.isOk(),
                              [&] { return backend_.allGatherColumns(*comm_, local, logits); }));
}

void DecoderModel::rowParallel(const TensorView& in, const TensorView& w, const TensorView& b, TensorView out) {
  backend_.linear(in, w, comm_ == nullptr || comm_->rank() == 0 ? optional(b) : nullptr, out);
  if (comm_ != nullptr) allReduce(out);
}

void DecoderModel::rowParallelAdd(const TensorView& in, const TensorView& w, const TensorView& b, TensorView x) {
  if (comm_ == nullptr || comm_->rank() == 0) {
    backend_.linearAdd(in, w, optional(b), x);
  } else {
    // x + sum of the ranks' products = the all-reduce of (rank 0: x + its product; others: their
    // product), so the other ranks overwrite their copy of x, and no partial-sum buffer is needed.
    backend_.linear(in, w, nullptr, x);
  }
  if (comm_ != nullptr) allReduce(x);
}

void DecoderModel::runLayer(const Layer& L, int64_t layer, TensorView x, TensorView h, TensorView qkv,
                            TensorView attn_out, int64_t T) {
  const int64_t H = config_.hidden_size;
  norm(x, L.attn_norm, L.attn_norm_b, h);
  backend_.linear(h, L.qkv_w, optional(L.qkv_b), qkv);
  attention(L, layer, qkv, attn_out);
  switch (config_.decoder.residual) {
    case ResidualWiring::kSequential:  // LayerNorm families and mixtures of experts
      rowParallelAdd(attn_out, L.o_w, L.o_b, x);
      norm(x, L.mlp_norm, L.mlp_norm_b, h);
      mlpAdd(L, h, x, T);
      return;
    case ResidualWiring::kParallel:  // both branches read n1 of the block's input
      rowParallelAdd(attn_out, L.o_w, L.o_b, x);
      mlpAdd(L, h, x, T);
      return;
    case ResidualWiring::kParallelTwoNorms: {  // the MLP reads n2 of the block's input
      TensorView h2 = backend_.scratch(kNormed2, T, H, slotDtype(kNormed2));
      norm(x, L.mlp_norm, L.mlp_norm_b, h2);
      rowParallelAdd(attn_out, L.o_w, L.o_b, x);
      mlpAdd(L, h2, x, T);
      return;
    }
    case ResidualWiring::kSandwich: {  // each branch's output normed before it is added
      const int64_t I = config_.intermediate_size;
      TensorView branch = backend_.scratch(kBranch, T, H, slotDtype(kBranch));
      TensorView up = backend_.scratch(kUp, T, 2 * I, slotDtype(kUp)), act = backend_.scratch(kAct, T, I, slotDtype(kAct));
      rowParallel(attn_out, L.o_w, L.o_b, branch);
      norm(branch, L.mlp_norm, L.mlp_norm_b, h);
      backend_.add(h, x);
      norm(x, L.pre_mlp_norm, TensorView(), h);
      backend_.linear(h, L.up_w, optional(L.up_b), up);
      mlpActivation(up, act);
      rowParallel(act, L.down_w, L.down_b, branch);
      norm(branch, L.post_mlp_norm, TensorView(), h);
      backend_.add(h, x);
      return;
    }
  }
}

}  // namespace llmrt
