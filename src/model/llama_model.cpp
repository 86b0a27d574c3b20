#include "model/llama_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>

#include "core/logging.h"
#include "loader/llama_weights.h"

namespace llmrt {
namespace {

// Columns [begin, begin + n) of a row-major 2-D view, as a strided view.
TensorView columns(const TensorView& t, int64_t begin, int64_t n) {
  TensorView v = t;
  v.data = static_cast<char*>(t.data) + begin * static_cast<int64_t>(dtypeSize(t.dtype));
  v.shape = Shape{t.shape[0], n};
  v.strides = Shape{t.strides[0], 1};
  return v;
}

}  // namespace

Result<std::unique_ptr<LlamaModel>> LlamaModel::load(const ModelConfig& config, const WeightSource& weights,
                                                     Backend& backend) {
  std::unique_ptr<LlamaModel> m(new LlamaModel(config, backend));
  LLMRT_RETURN_IF_ERROR(m->loadWeights(weights));
  m->rope_ = computeRopeTable(config, config.max_position_embeddings);
  return m;
}

Status LlamaModel::loadWeights(const WeightSource& weights) {
  const ModelConfig& c = config_;
  // Fetches tensors, checks their shapes, and hands them to the backend fused.
  auto fetch = [&](const std::string& name, Shape expect) -> Result<TensorView> {
    LLMRT_ASSIGN_OR_RETURN(TensorView t, weights(name));
    if (t.shape != expect)
      return invalidArgument("tensor '" + name + "' has shape " + t.shape.toString() + "; expected " +
                             expect.toString());
    return t;
  };
  auto load = [&](const std::string& fused_name, std::initializer_list<std::pair<std::string, Shape>> parts,
                  TensorView& out) -> Status {
    std::vector<TensorView> views;
    for (const auto& [name, shape] : parts) {
      LLMRT_ASSIGN_OR_RETURN(TensorView t, fetch(name, shape));
      views.push_back(t);
    }
    LLMRT_ASSIGN_OR_RETURN(out, backend_.loadWeight(views, fused_name));
    return Status::ok();
  };

  // Names, shapes and which tensors exist come from the loader's Llama tensor table.
  using T = LlamaTensor;
  auto part = [&](LlamaTensor t, int64_t layer) {
    return std::pair<std::string, Shape>(llamaTensorName(t, layer), llamaTensorShape(t, c));
  };
  LLMRT_RETURN_IF_ERROR(load(llamaTensorName(T::kEmbedTokens), {part(T::kEmbedTokens, 0)}, embed_));
  LLMRT_RETURN_IF_ERROR(load(llamaTensorName(T::kFinalNorm), {part(T::kFinalNorm, 0)}, final_norm_));
  if (!llamaTensorPresent(T::kLmHead, c)) {
    lm_head_ = embed_;
  } else {
    LLMRT_RETURN_IF_ERROR(load(llamaTensorName(T::kLmHead), {part(T::kLmHead, 0)}, lm_head_));
  }
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
    auto p = [&](LlamaTensor t) { return part(t, i); };
    // The backend's names for the fused [q | k | v] and [gate | up] weights.
    auto fused = [&](const char* s) { return llamaLayerTensorName(i, s); };
    LLMRT_RETURN_IF_ERROR(load(llamaTensorName(T::kInputNorm, i), {p(T::kInputNorm)}, L.input_norm));
    LLMRT_RETURN_IF_ERROR(load(llamaTensorName(T::kPostNorm, i), {p(T::kPostNorm)}, L.post_norm));
    LLMRT_RETURN_IF_ERROR(
        load(fused("self_attn.qkv_proj.weight"), {p(T::kQProj), p(T::kKProj), p(T::kVProj)}, L.qkv_w));
    if (llamaTensorPresent(T::kQBias, c)) {
      LLMRT_RETURN_IF_ERROR(
          load(fused("self_attn.qkv_proj.bias"), {p(T::kQBias), p(T::kKBias), p(T::kVBias)}, L.qkv_b));
    }
    LLMRT_RETURN_IF_ERROR(load(llamaTensorName(T::kOProj, i), {p(T::kOProj)}, L.o_w));
    if (llamaTensorPresent(T::kOBias, c))
      LLMRT_RETURN_IF_ERROR(load(llamaTensorName(T::kOBias, i), {p(T::kOBias)}, L.o_b));
    LLMRT_RETURN_IF_ERROR(
        load(fused("mlp.gate_up_proj.weight"), {p(T::kGateProj), p(T::kUpProj)}, L.gate_up_w));
    LLMRT_RETURN_IF_ERROR(load(llamaTensorName(T::kDownProj, i), {p(T::kDownProj)}, L.down_w));
    if (llamaTensorPresent(T::kGateBias, c)) {
      LLMRT_RETURN_IF_ERROR(
          load(fused("mlp.gate_up_proj.bias"), {p(T::kGateBias), p(T::kUpBias)}, L.gate_up_b));
      LLMRT_RETURN_IF_ERROR(load(llamaTensorName(T::kDownBias, i), {p(T::kDownBias)}, L.down_b));
    }
    L.window = c.slidingWindowForLayer(i).value_or(0);
    progress(i + 1, false);
  }
  LLMRT_RETURN_IF_ERROR(backend_.finishWeights());  // copies still in flight land (or fail) here
  progress(c.num_hidden_layers, true);
  std::vector<int32_t> windows;
  for (const Layer& L : layers_) windows.push_back(static_cast<int32_t>(std::min<int64_t>(L.window, INT32_MAX)));
  return setAttentionWindows(windows);
}

Status LlamaModel::setAttentionWindows(std::span<const int32_t> per_layer) {
  if (per_layer.size() != layers_.size())
    return fieldError("LlamaModel", "attention windows", std::to_string(per_layer.size()) + " values",
                      "one per layer (" + std::to_string(layers_.size()) + ")");
  bool full = per_layer.empty();
  int64_t widest = 0;
  for (size_t i = 0; i < per_layer.size(); ++i) {
    if (per_layer[i] < 0)
      return fieldError("LlamaModel", "attention window of layer " + std::to_string(i), std::to_string(per_layer[i]),
                        ">= 0 tokens (0 = full attention)");
    full = full || per_layer[i] == 0;
    widest = std::max<int64_t>(widest, per_layer[i]);
  }
  for (size_t i = 0; i < per_layer.size(); ++i) layers_[i].window = per_layer[i];
  step_window_ = full ? 0 : widest;
  return Status::ok();
}

DType LlamaModel::slotDtype(int slot) const {
  // Slots 1 (normed input), 3 (attention output), 4 (gate|up), 5 (SiLU·mul) and 7 (final norm)
  // only feed products: the backend's activation dtype. The residual stream (0, 6), q/k/v
  // (2, rotated and attended in float32) and the logits (8) stay F32.
  switch (slot) {
    case 1: case 3: case 4: case 5: case 7: return backend_.activationDtype();
    default: return DType::kF32;
  }
}

Status LlamaModel::reserveActivations(int64_t max_tokens, int64_t max_logit_rows) {
  const ModelConfig& c = config_;
  const int64_t T = max_tokens, R = max_logit_rows;
  const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.qSize(), KV = c.kvSize();
  const std::pair<int64_t, int64_t> shapes[] = {{T, H}, {T, H}, {T, Q + 2 * KV}, {T, Q}, {T, 2 * I},
                                                {T, I}, {R, H}, {R, H},          {R, c.vocab_size}};
  for (int slot = 0; slot < static_cast<int>(std::size(shapes)); ++slot)
    if (backend_.scratch(slot, shapes[slot].first, shapes[slot].second, slotDtype(slot)).data == nullptr)
      return resourceExhausted("cannot allocate activation buffer " + std::to_string(slot) + " [" +
                               std::to_string(shapes[slot].first) + ", " + std::to_string(shapes[slot].second) + "]");
  return backend_.reserveWorkspace(T, std::max({H, I, Q}));
}

Result<TensorView> LlamaModel::forward(const StepInputs& in, const StepLayout& layout) {
  LLMRT_RETURN_IF_ERROR(backend_.beginStep(in));
  if (layout.record)
    backend_.recordOrReplay(static_cast<uint64_t>(layout.rows), [&] { run(layout.rows, layout.logit_rows); });
  else
    run(layout.rows, layout.logit_rows);
  if (layout.real_logit_rows == 0) return TensorView(nullptr, DType::kF32, Shape{0, config_.vocab_size});
  TensorView logits = backend_.scratch(8, layout.logit_rows, config_.vocab_size);
  logits.shape = Shape{layout.real_logit_rows, config_.vocab_size};
  return logits;
}

void LlamaModel::run(int64_t T, int64_t R) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.qSize(), KV = c.kvSize();
  auto buf = [&](int slot, int64_t rows, int64_t cols) { return backend_.scratch(slot, rows, cols, slotDtype(slot)); };
  TensorView x = buf(0, T, H);
  TensorView h = buf(1, T, H);
  TensorView qkv = buf(2, T, Q + 2 * KV);
  TensorView attn_out = buf(3, T, Q);
  TensorView gate_up = buf(4, T, 2 * I);
  TensorView act = buf(5, T, I);
  TensorView last = buf(6, R, H);
  TensorView last_norm = buf(7, R, H);
  TensorView logits = buf(8, R, c.vocab_size);
  TensorView q = columns(qkv, 0, Q), k = columns(qkv, Q, KV), v = columns(qkv, Q + KV, KV);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const float eps = static_cast<float>(c.rms_norm_eps);

  // Residual stream x; h the normed input of each block. The o and down products add their
  // output to x (linearAdd: on CUDA inside the product, no temporary); each is chained to the
  // product of the next normed input (linearAddNormLinear, which may split the norm over the two).
  auto bias = [](const TensorView& b) { return b.data ? &b : nullptr; };  // (most Llama checkpoints have none)
  backend_.embedding(embed_, x);
  backend_.rmsNorm(x, layers_[0].input_norm, eps, h);
  backend_.linear(h, layers_[0].qkv_w, bias(layers_[0].qkv_b), qkv);
  for (size_t li = 0; li < layers_.size(); ++li) {
    const Layer& L = layers_[li];
    const int64_t layer = static_cast<int64_t>(li);
    backend_.ropeAttention(layer, q, k, v, c.head_dim, c.num_attention_heads, L.window, scale, attn_out);
    backend_.linearAddNormLinear(attn_out, L.o_w, bias(L.o_b), x, L.post_norm, eps, h, L.gate_up_w,
                                 bias(L.gate_up_b), gate_up);
    backend_.siluMul(gate_up, act);
    if (li + 1 < layers_.size()) {
      const Layer& next = layers_[li + 1];
      backend_.linearAddNormLinear(act, L.down_w, bias(L.down_b), x, next.input_norm, eps, h, next.qkv_w,
                                   bias(next.qkv_b), qkv);
    } else {
      backend_.linearAdd(act, L.down_w, bias(L.down_b), x);
    }
  }
  if (R == 0) return;
  backend_.gatherLogitRows(x, last);
  backend_.rmsNorm(last, final_norm_, eps, last_norm);
  backend_.linear(last_norm, lm_head_, nullptr, logits);
}

}  // namespace llmrt
