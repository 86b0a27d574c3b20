#include "model/llama_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>

#include "core/logging.h"

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

std::string layerName(int64_t i, const char* suffix) { return "model.layers." + std::to_string(i) + "." + suffix; }

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

  const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.qSize(), KV = c.kvSize(), V = c.vocab_size;
  LLMRT_RETURN_IF_ERROR(load("model.embed_tokens.weight", {{"model.embed_tokens.weight", {V, H}}}, embed_));
  LLMRT_RETURN_IF_ERROR(load("model.norm.weight", {{"model.norm.weight", {H}}}, final_norm_));
  if (c.tie_word_embeddings) {
    lm_head_ = embed_;
  } else {
    LLMRT_RETURN_IF_ERROR(load("lm_head.weight", {{"lm_head.weight", {V, H}}}, lm_head_));
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
    auto n = [&](const char* s) { return layerName(i, s); };
    LLMRT_RETURN_IF_ERROR(load(n("input_layernorm.weight"), {{n("input_layernorm.weight"), {H}}}, L.input_norm));
    LLMRT_RETURN_IF_ERROR(
        load(n("post_attention_layernorm.weight"), {{n("post_attention_layernorm.weight"), {H}}}, L.post_norm));
    LLMRT_RETURN_IF_ERROR(load(n("self_attn.qkv_proj.weight"),
                               {{n("self_attn.q_proj.weight"), {Q, H}},
                                {n("self_attn.k_proj.weight"), {KV, H}},
                                {n("self_attn.v_proj.weight"), {KV, H}}},
                               L.qkv_w));
    if (c.attention_bias) {
      LLMRT_RETURN_IF_ERROR(load(n("self_attn.qkv_proj.bias"),
                                 {{n("self_attn.q_proj.bias"), {Q}},
                                  {n("self_attn.k_proj.bias"), {KV}},
                                  {n("self_attn.v_proj.bias"), {KV}}},
                                 L.qkv_b));
    }
    LLMRT_RETURN_IF_ERROR(load(n("self_attn.o_proj.weight"), {{n("self_attn.o_proj.weight"), {H, Q}}}, L.o_w));
    if (c.o_proj_bias)
      LLMRT_RETURN_IF_ERROR(load(n("self_attn.o_proj.bias"), {{n("self_attn.o_proj.bias"), {H}}}, L.o_b));
    LLMRT_RETURN_IF_ERROR(load(n("mlp.gate_up_proj.weight"),
                               {{n("mlp.gate_proj.weight"), {I, H}}, {n("mlp.up_proj.weight"), {I, H}}},
                               L.gate_up_w));
    LLMRT_RETURN_IF_ERROR(load(n("mlp.down_proj.weight"), {{n("mlp.down_proj.weight"), {H, I}}}, L.down_w));
    if (c.mlp_bias) {
      LLMRT_RETURN_IF_ERROR(load(n("mlp.gate_up_proj.bias"),
                                 {{n("mlp.gate_proj.bias"), {I}}, {n("mlp.up_proj.bias"), {I}}}, L.gate_up_b));
      LLMRT_RETURN_IF_ERROR(load(n("mlp.down_proj.bias"), {{n("mlp.down_proj.bias"), {H}}}, L.down_b));
    }
    L.sliding_window = c.slidingWindowForLayer(i);
    progress(i + 1, false);
  }
  LLMRT_RETURN_IF_ERROR(backend_.finishWeights());  // copies still in flight land (or fail) here
  progress(c.num_hidden_layers, true);
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

int64_t LlamaModel::decodeBucket(int64_t n) {
  static constexpr int64_t kBuckets[] = {1,  2,  3,   4,   6,   8,   12,  16,  24,  32,  48,  64,
                                         96, 128, 160, 192, 224, 256, 320, 384, 448, 512};
  for (int64_t b : kBuckets)
    if (n <= b) return b;
  return n;
}

Status LlamaModel::reserveActivations(int64_t max_tokens, int64_t max_logit_rows) {
  const ModelConfig& c = config_;
  // Decode steps are padded up to kMaxRecordedBatch rows, and each row has logits.
  const int64_t T = std::max(max_tokens, kMaxRecordedBatch), R = std::max(max_logit_rows, kMaxRecordedBatch);
  const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.qSize(), KV = c.kvSize();
  const std::pair<int64_t, int64_t> shapes[] = {{T, H}, {T, H}, {T, Q + 2 * KV}, {T, Q}, {T, 2 * I},
                                                {T, I}, {R, H}, {R, H},          {R, c.vocab_size}};
  for (int slot = 0; slot < static_cast<int>(std::size(shapes)); ++slot)
    if (backend_.scratch(slot, shapes[slot].first, shapes[slot].second, slotDtype(slot)).data == nullptr)
      return resourceExhausted("cannot allocate activation buffer " + std::to_string(slot) + " [" +
                               std::to_string(shapes[slot].first) + ", " + std::to_string(shapes[slot].second) + "]");
  return backend_.reserveWorkspace(T, std::max({H, I, Q}));
}

Result<TensorView> LlamaModel::forward(const ForwardBatch& batch) {
  const ModelConfig& c = config_;
  const int64_t T = batch.numTokens();
  const int64_t tpb = backend_.kvGeometry().tokens_per_block;
  if (T == 0) return invalidArgument("forward: empty batch");
  if (tpb <= 0) return failedPrecondition("forward: KV cache pools are not allocated");

  // A decode step (one token and its logits per sequence) is padded to its bucket
  // and recorded where the backend can: the padding rows attend to one key of
  // block 0, write nothing and are dropped.
  bool decode = backend_.canRecord() && T <= kMaxRecordedBatch;
  for (const ForwardSeq& fs : batch.seqs) decode = decode && fs.num_new == 1 && fs.logits == LogitsMode::kLast;
  const int64_t padded = decode ? decodeBucket(T) : T;

  // Positions, cache slots, sequences and logits rows of the packed tokens.
  token_ids_.assign(batch.token_ids.begin(), batch.token_ids.end());
  positions_.resize(static_cast<size_t>(T));
  slots_.resize(static_cast<size_t>(T));
  seqs_.clear();
  logit_rows_.clear();
  // RoPE: the model's table, or (dynamic NTK) one table per sequence, table s for sequence s.
  const bool per_seq_rope = ropeDependsOnLength(c);
  if (per_seq_rope)
    inv_freq_.clear();
  else
    inv_freq_ = rope_.inv_freq;
  int64_t row = 0;
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const ForwardSeq& fs = batch.seqs[s];
    const int64_t kv_len = fs.num_cached + fs.num_new;
    if (static_cast<int64_t>(fs.block_table.size()) * tpb < kv_len)
      return invalidArgument("forward: sequence " + std::to_string(s) + " has " + std::to_string(fs.block_table.size()) +
                             " blocks for " + std::to_string(kv_len) + " tokens");
    if (per_seq_rope) {
      const RopeTable rt = computeRopeTable(c, kv_len);
      inv_freq_.insert(inv_freq_.end(), rt.inv_freq.begin(), rt.inv_freq.end());
    }
    seqs_.push_back(StepSeq{row, fs.num_new, kv_len, fs.block_table, per_seq_rope ? static_cast<int32_t>(s) : 0});
    for (int64_t i = 0; i < fs.num_new; ++i) {
      const int64_t pos = fs.num_cached + i;
      positions_[static_cast<size_t>(row + i)] = static_cast<int32_t>(pos);
      slots_[static_cast<size_t>(row + i)] = static_cast<int64_t>(fs.block_table[static_cast<size_t>(pos / tpb)]) * tpb + pos % tpb;
      if (fs.logits == LogitsMode::kAll || (fs.logits == LogitsMode::kLast && i == fs.num_new - 1))
        logit_rows_.push_back(row + i);
    }
    row += fs.num_new;
  }
  static const int32_t kPadTable[1] = {0};
  for (int64_t r = T; r < padded; ++r) {
    token_ids_.push_back(0);
    positions_.push_back(0);
    slots_.push_back(-1);
    if (per_seq_rope) inv_freq_.insert(inv_freq_.end(), rope_.inv_freq.begin(), rope_.inv_freq.end());
    seqs_.push_back(StepSeq{r, 1, 1, std::span<const int32_t>(kPadTable, 1),
                            per_seq_rope ? static_cast<int32_t>(seqs_.size()) : 0});
    logit_rows_.push_back(r);
  }
  const int64_t R = static_cast<int64_t>(logit_rows_.size());

  StepInputs in;
  in.token_ids = token_ids_;
  in.positions = positions_;
  in.slots = slots_;
  in.seqs = seqs_;
  in.logit_rows = logit_rows_;
  in.fed_tokens = batch.fed;
  in.rope_inv_freq = inv_freq_;
  in.rotary_dim = rope_.rotary_dim;
  in.rope_attention_scaling = rope_.attention_scaling;
  LLMRT_RETURN_IF_ERROR(backend_.beginStep(in));

  if (decode)
    backend_.recordOrReplay(static_cast<uint64_t>(padded), [&] { run(padded, R); });
  else
    run(T, R);
  const int64_t real_rows = R - (padded - T);
  if (real_rows == 0) return TensorView(nullptr, DType::kF32, Shape{0, c.vocab_size});
  TensorView logits = backend_.scratch(8, R, c.vocab_size);
  logits.shape = Shape{real_rows, c.vocab_size};
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
    backend_.ropeAttention(layer, q, k, v, c.head_dim, c.num_attention_heads, L.sliding_window.value_or(0), scale,
                           attn_out);
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
