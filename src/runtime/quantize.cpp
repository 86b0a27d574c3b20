// quantizeCheckpoint (include/llmrt/quantize.h): fp8 / int8 straight to the writer
// (loader/quantize_checkpoint.h); smoothquant calibrated here first: the calibration text runs
// through the model on the CPU backend, whose product observer records each product input's
// per-channel max |x| (loader/smoothing.h says which inputs and what is done with them).
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "core/fp8.h"
#include "core/logging.h"
#include "core/mapped_file.h"
#include "llmrt/quantize.h"
#include "llmrt/tokenizer.h"
#include "core/thread_pool.h"
#include "loader/arch_table.h"
#include "loader/awq_pack.h"
#include "loader/decoder_weights.h"
#include "loader/model_directory.h"
#include "loader/quantize_checkpoint.h"
#include "loader/smoothing.h"
#include "model/decoder_model.h"
#include "runtime/forward_batch.h"
#include "runtime/step_builder.h"

namespace llmrt {
namespace {

// What calibration saw at the input of one observed product.
struct Observed {
  std::vector<float> max_abs;   // per channel
  std::vector<double> sum_abs;  // per channel, over every row
  std::vector<float> rows;      // kept rows (AWQ's search), row after row
  int64_t seen = 0;             // rows seen
};

struct Calibration {
  std::map<std::string, Observed> inputs;  // by observed weight name
  std::vector<float> kv_max;               // [layer][K, V]: max |K| (after RoPE), max |V|
  int64_t samples = 0, tokens = 0;
};

// The largest |K| and |V| of each layer over the first `tokens` cache slots (blocks 0, 1, ... in
// order) into kv_max ([layer][K, V]).
Status observeKv(Backend& b, int64_t tokens, std::vector<float>& kv_max) {
  const KvPoolGeometry& g = b.kvGeometry();
  const int64_t tpb = g.tokens_per_block, hd = g.head_dim;
  kv_max.resize(static_cast<size_t>(2 * g.num_layers), 0.0f);
  std::vector<float> block(static_cast<size_t>(g.elementsPerBlock()));
  for (int64_t blk = 0; blk * tpb < tokens; ++blk) {
    LLMRT_RETURN_IF_ERROR(b.readKvBlock(KvPool::kPrimary, static_cast<int32_t>(blk), block.data()));
    const int64_t used = std::min(tpb, tokens - blk * tpb);
    for (int64_t lk = 0; lk < 2 * g.num_layers; ++lk)  // [layer][K, V][kv_heads][tpb][hd]
      for (int64_t h = 0; h < g.num_kv_heads; ++h)
        for (int64_t i = 0; i < used * hd; ++i) {
          const float v = block[static_cast<size_t>(((lk * g.num_kv_heads + h) * tpb) * hd + i)];
          kv_max[static_cast<size_t>(lk)] = std::fmax(kv_max[static_cast<size_t>(lk)], std::fabs(v));
        }
  }
  return Status::ok();
}

// Runs `samples` through the model, recording per channel max |x| and mean |x| of the inputs of
// `observed`, and keeping every `keep_every`-th row (0: none); with `kv`, each layer's largest
// |K| and |V| too.
Result<Calibration> calibrate(const ModelDirectory& dir, const std::vector<std::vector<int32_t>>& samples,
                              const std::vector<std::string>& observed, int threads, int64_t keep_every,
                              bool kv) {
  Calibration cal;
  CpuBackend cpu(threads);
  for (const std::string& name : observed) cal.inputs[name];
  cpu.setProductObserver([&cal, keep_every](const std::string& weight, const TensorView& x) {
    auto it = cal.inputs.find(weight);
    if (it == cal.inputs.end()) return;
    const int64_t rows = x.shape[0], cols = x.shape[1];
    Observed& o = it->second;
    o.max_abs.resize(static_cast<size_t>(cols), 0.0f);
    o.sum_abs.resize(static_cast<size_t>(cols), 0.0);
    for (int64_t r = 0; r < rows; ++r, ++o.seen) {
      const float* row = x.as<const float>() + r * x.strides[0];
      for (int64_t j = 0; j < cols; ++j) {
        o.max_abs[static_cast<size_t>(j)] = std::fmax(o.max_abs[static_cast<size_t>(j)], std::fabs(row[j]));
        o.sum_abs[static_cast<size_t>(j)] += std::fabs(row[j]);
      }
      if (keep_every > 0 && o.seen % keep_every == 0) o.rows.insert(o.rows.end(), row, row + cols);
    }
  });
  const WeightStore* store = &dir.weights;
  LLMRT_ASSIGN_OR_RETURN(
      std::unique_ptr<DecoderModel> model,
      DecoderModel::load(dir.config, [store](const std::string& n) { return store->tensor(n); }, cpu, {}));
  int64_t longest = 0;
  for (const auto& s : samples) longest = std::max(longest, static_cast<int64_t>(s.size()));
  constexpr int64_t kTokensPerBlock = 16;
  const int64_t blocks = (longest + kTokensPerBlock - 1) / kTokensPerBlock;
  const KvPoolGeometry g{blocks, dir.config.num_hidden_layers, model->config().num_key_value_heads,
                         dir.config.head_dim, kTokensPerBlock, DType::kF32};
  LLMRT_RETURN_IF_ERROR(cpu.allocateKvPools(g, 0));
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  StepBuilder steps;
  for (const auto& s : samples) {
    ForwardBatch batch;
    batch.add(s.data(), static_cast<int64_t>(s.size()), 0, table, LogitsMode::kLast);
    StepLayout layout;
    LLMRT_ASSIGN_OR_RETURN(const StepInputs in, steps.build(batch, *model, cpu, &layout));
    LLMRT_ASSIGN_OR_RETURN(TensorView logits, model->forward(in, layout));
    (void)logits;
    if (kv) LLMRT_RETURN_IF_ERROR(observeKv(cpu, static_cast<int64_t>(s.size()), cal.kv_max));
    ++cal.samples;
    cal.tokens += static_cast<int64_t>(s.size());
  }
  return cal;
}

// The group's matrices (checkpoint tensors [out, hidden]) one under the other, float32.
Result<std::vector<float>> groupMatrix(const WeightStore& weights, const std::vector<std::string>& names,
                                       std::string_view optional_prefix, int64_t hidden) {
  std::vector<float> all;
  for (const std::string& name : names) {
    std::string found = name;
    if (weights.find(found) == nullptr && !optional_prefix.empty() && name.starts_with(optional_prefix))
      found = name.substr(optional_prefix.size());
    LLMRT_ASSIGN_OR_RETURN(TensorView t, weights.tensor(found));
    if (t.shape.rank() != 2 || t.shape[1] != hidden)
      return invalidArgument("quantize: '" + name + "' has shape " + t.shape.toString() + "; expected [rows, " +
                             std::to_string(hidden) + "]");
    const size_t at = all.size();
    all.resize(at + static_cast<size_t>(t.numel()));
    convertToF32(t.data, t.dtype, all.data() + at, static_cast<size_t>(t.numel()));
  }
  return all;
}

// Per-column max |w| of a [rows, hidden] matrix.
std::vector<float> columnMax(const std::vector<float>& w, int64_t hidden) {
  std::vector<float> m(static_cast<size_t>(hidden), 0.0f);
  for (size_t i = 0; i < w.size(); ++i) m[i % m.size()] = std::fmax(m[i % m.size()], std::fabs(w[i]));
  return m;
}

// The error a change d of a weight row's features [0, len) adds to the product's outputs over the
// kept input rows: sum over rows x of (x[0, len) . d)^2 (x: `rows` rows of `stride` floats).
double outputError(const float* x, int64_t rows, int64_t stride, const float* d, int64_t len) {
  double err = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * stride;
    float dot = 0.0f;
    for (int64_t j = 0; j < len; ++j) dot += xr[j] * d[j];
    err += static_cast<double>(dot) * dot;
  }
  return err;
}

// AWQ's search for one group: of the grid alpha = 0, 1/20, ..., 19/20, the scales
// s = a^alpha / sqrt(max(a^alpha) min(a^alpha)) (a: mean |x| per channel, at least 1e-4) whose
// quantized matrix W' = Q(W s) / s gives the smallest sum over the kept rows x of |x (W' - W)^T|^2.
std::vector<float> awqScales(const Observed& o, const std::vector<float>& w, int64_t h, int64_t group,
                             ThreadPool& pool, double* best_alpha) {
  const int64_t n = static_cast<int64_t>(w.size()) / h, rows = static_cast<int64_t>(o.rows.size()) / h;
  std::vector<float> a(static_cast<size_t>(h));
  for (int64_t j = 0; j < h; ++j)
    a[static_cast<size_t>(j)] =
        static_cast<float>(std::max(o.sum_abs[static_cast<size_t>(j)] / static_cast<double>(std::max<int64_t>(o.seen, 1)), 1e-4));
  std::vector<float> best, s(static_cast<size_t>(h)), scaled(w.size()), deq(w.size());
  double best_err = INFINITY;
  constexpr int kGrid = 20;
  for (int i = 0; i < kGrid; ++i) {
    const double alpha = static_cast<double>(i) / kGrid;
    float mx = 0.0f, mn = INFINITY;
    for (int64_t j = 0; j < h; ++j) {
      s[static_cast<size_t>(j)] = static_cast<float>(std::pow(static_cast<double>(a[static_cast<size_t>(j)]), alpha));
      mx = std::max(mx, s[static_cast<size_t>(j)]);
      mn = std::min(mn, s[static_cast<size_t>(j)]);
    }
    const float norm = std::sqrt(mx * mn);
    for (float& v : s) v /= norm;
    for (size_t e = 0; e < w.size(); ++e) scaled[e] = w[e] * s[e % s.size()];
    std::vector<double> band_err(static_cast<size_t>(n), 0.0);
    pool.parallelFor(n, [&](int64_t b, int64_t e) {
      std::vector<float> d(static_cast<size_t>(h));
      for (int64_t r = b; r < e; ++r) {
        awqRoundTrip(scaled.data() + r * h, 1, h, group, deq.data() + r * h);
        for (int64_t j = 0; j < h; ++j)
          d[static_cast<size_t>(j)] = deq[static_cast<size_t>(r * h + j)] / s[static_cast<size_t>(j)] - w[static_cast<size_t>(r * h + j)];
        band_err[static_cast<size_t>(r)] = outputError(o.rows.data(), rows, h, d.data(), h);
      }
    }, 8);
    double err = 0.0;
    for (double v : band_err) err += v;
    if (err < best_err) {
      best_err = err;
      best = s;
      *best_alpha = alpha;
    }
  }
  if (best.empty()) best.assign(static_cast<size_t>(h), 1.0f);  // (errors not finite: no scaling)
  return best;
}

// AutoAWQ's clipping search for one matrix W [n, h] with its group's column scales s (ones when it
// has none), on ws = W s: for each row and group of `group` inputs with largest magnitude amax, of
// the maxima m = amax (1 - i / 20), i = 0..9, the one whose clamped-then-quantized group
// Q(clamp(w, -m, m)) gives the smallest sum over the kept rows x of ((x / s) . (Q - w))^2, the
// error it adds to the product's output. The chosen maxima, [n][h / group].
std::vector<float> awqClipMaxima(const Observed& o, std::span<const float> s, const std::vector<float>& w,
                                 int64_t h, int64_t group, ThreadPool& pool) {
  const int64_t n = static_cast<int64_t>(w.size()) / h, rows = static_cast<int64_t>(o.rows.size()) / h;
  const int64_t groups = h / group;
  std::vector<float> ws(w.size()), xs(o.rows.size());  // W s, and the kept rows over s: its inputs
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = w[i] * s[i % static_cast<size_t>(h)];
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = o.rows[i] / s[i % static_cast<size_t>(h)];
  std::vector<float> best(static_cast<size_t>(n * groups));
  constexpr int kGrid = 20, kSteps = 10;  // shrink by up to half (AutoAWQ's max_shrink 0.5)
  pool.parallelFor(n, [&](int64_t b, int64_t e) {
    const auto g = static_cast<size_t>(group);
    std::vector<float> clamped(g), deq(g), d(g);
    for (int64_t r = b; r < e; ++r)
      for (int64_t gi = 0; gi < groups; ++gi) {
        const float* v = ws.data() + r * h + gi * group;
        float amax = 0.0f;
        for (int64_t j = 0; j < group; ++j) amax = std::fmax(amax, std::fabs(v[j]));
        double best_err = INFINITY;
        float best_m = amax;
        for (int i = 0; i < kSteps; ++i) {
          const float m = amax * (1.0f - static_cast<float>(i) / kGrid);
          for (int64_t j = 0; j < group; ++j) clamped[static_cast<size_t>(j)] = std::clamp(v[j], -m, m);
          awqRoundTrip(clamped.data(), 1, group, group, deq.data());
          for (int64_t j = 0; j < group; ++j) d[static_cast<size_t>(j)] = deq[static_cast<size_t>(j)] - v[j];
          const double err = outputError(xs.data() + gi * group, rows, h, d.data(), group);
          if (err < best_err) best_err = err, best_m = m;
        }
        best[static_cast<size_t>(r * groups + gi)] = best_m;
      }
  }, 4);
  return best;
}

// The calibration samples: consecutive runs of calib_seq_len tokens of the calibration text
// (capped by the model's positions).
Result<std::vector<std::vector<int32_t>>> calibrationSamples(const QuantizeOptions& o, const ModelDirectory& dir) {
  if (!(o.alpha >= 0.0 && o.alpha <= 1.0))
    return invalidArgument("quantize: --alpha has value " + std::to_string(o.alpha) + "; expected a value in [0, 1]");
  if (o.calib_size < 1 || o.calib_seq_len < 1)
    return invalidArgument("quantize: --calib-size and --calib-seq-len must be at least 1 (got " +
                           std::to_string(o.calib_size) + ", " + std::to_string(o.calib_seq_len) + ")");
  if (o.calib_file.empty()) return invalidArgument("quantize: " + o.method + " needs calibration text (--calib-file)");
  Result<std::string> text = readTextFile(o.calib_file);
  if (!text.isOk())
    return Status(text.status().code(), "quantize: the calibration text (--calib-file): " + text.status().message());
  LLMRT_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, Tokenizer::fromDirectory(dir.dir));
  if (tok == nullptr) return invalidArgument("quantize: " + o.model + " has no tokenizer to read the calibration text");
  LLMRT_ASSIGN_OR_RETURN(std::vector<TokenId> ids, tok->encode(*text, false));
  if (ids.empty()) return invalidArgument("quantize: the calibration text " + o.calib_file + " is empty");
  const int64_t len = std::min<int64_t>(o.calib_seq_len, dir.config.max_position_embeddings);
  std::vector<std::vector<int32_t>> samples;
  for (size_t at = 0; at < ids.size() && static_cast<int64_t>(samples.size()) < o.calib_size;
       at += static_cast<size_t>(len))
    samples.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(at),
                         ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), at + static_cast<size_t>(len))));
  return samples;
}

// The FP8 KV cache's scales from what calibration saw (max / 448; 1 for a layer that only saw
// zeros); empty without kv_max.
std::vector<float> kvScales(const Calibration& cal) {
  std::vector<float> s;
  for (float m : cal.kv_max) s.push_back(m > 0.0f ? m / kFp8E4M3Max : 1.0f);
  return s;
}

// smoothquant and awq: calibrate, then each norm-fed group's column scales (SmoothQuant's from
// the maxima, AWQ's by its search) folded in as the checkpoint is written.
Result<QuantizeReport> calibratedCheckpoint(const QuantizeOptions& o) {
  const bool awq = o.method == "awq";
  LLMRT_ASSIGN_OR_RETURN(ModelDirectory dir, ModelDirectory::open(o.model));
  LLMRT_RETURN_IF_ERROR(checkQuantizable(o, dir));
  LLMRT_RETURN_IF_ERROR(checkQuantizeOutput(o));
  LLMRT_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> samples, calibrationSamples(o, dir));
  int64_t tokens = 0;
  for (const auto& smp : samples) tokens += static_cast<int64_t>(smp.size());
  constexpr int64_t kRowsKept = 128;  // calibration rows each AWQ search measures its error on
  const std::vector<SmoothingGroup> groups = smoothingGroups(dir.config);
  std::vector<std::string> observed;
  for (const SmoothingGroup& g : groups) observed.push_back(g.observed);
  // AWQ's clipping also covers the products outside the norm-fed groups: the attention output's
  // (o) and the MLP's down projection, on their own inputs (dense layers: experts stay 16-bit).
  std::vector<std::pair<std::string, std::vector<std::string>>> unscaled;  // observed name, its tensors
  if (awq && o.awq_clip)
    for (int64_t l = 0; l < dir.config.num_hidden_layers; ++l)
      for (DecoderWeight w : {DecoderWeight::kO, DecoderWeight::kDown})
        if (decoderWeightPresent(w, dir.config, l)) {
          unscaled.emplace_back(decoderWeightName(w, l), decoderWeightTensors(w, dir.config, l));
          observed.push_back(unscaled.back().first);
        }
  LLMRT_ASSIGN_OR_RETURN(Calibration cal, calibrate(dir, samples, observed, o.num_threads,
                                                    awq ? std::max<int64_t>(1, tokens / kRowsKept) : 0,
                                                    o.kv_cache_scales));
  const int64_t h = dir.config.hidden_size;
  const std::string_view prefix = archEntry(dir.config.arch).names.optional_prefix;
  std::unique_ptr<ThreadPool> pool = awq ? std::make_unique<ThreadPool>(o.num_threads) : nullptr;
  TensorSmoothing smoothing;
  double alpha_sum = 0.0;
  int64_t clipped = 0;  // AWQ: matrices clipped
  // AWQ's clipping of checkpoint matrix `m` [rows, k] read with column scales s, from `in`.
  auto clip = [&](const std::string& m, const Observed& in, std::span<const float> s, int64_t k) -> Status {
    LLMRT_ASSIGN_OR_RETURN(std::vector<float> w, groupMatrix(dir.weights, {m}, prefix, k));
    smoothing.clip(m, awqClipMaxima(in, s, w, k, o.awq_group_size, *pool), o.awq_group_size);
    ++clipped;
    return Status::ok();
  };
  for (const SmoothingGroup& g : groups) {
    const Observed& in = cal.inputs[g.observed];
    if (static_cast<int64_t>(in.max_abs.size()) != h || (awq && in.rows.empty()))
      return internalError(o.method + ": calibration saw no input of " + g.observed);
    LLMRT_ASSIGN_OR_RETURN(std::vector<float> w, groupMatrix(dir.weights, g.consumers, prefix, h));
    double alpha = o.alpha;
    std::vector<float> s = awq ? awqScales(in, w, h, o.awq_group_size, *pool, &alpha)
                               : smoothingScales(in.max_abs, columnMax(w, h), o.alpha);
    if (awq && o.awq_clip) {
      // AutoAWQ clips every matrix but the query and key projections (their outputs meet in the
      // attention scores, which the clipping's output error does not measure).
      const std::vector<std::string> qkv = decoderWeightTensors(DecoderWeight::kQkv, dir.config, g.layer);
      for (const std::string& m : g.consumers) {
        const bool attention_input = std::count(qkv.begin(), qkv.end(), m) > 0;
        const bool value = qkv.size() == 3 && m == qkv[2];  // (packed q/k/v: not clipped)
        if (attention_input && !value) continue;
        LLMRT_RETURN_IF_ERROR(clip(m, in, s, h));
      }
    }
    smoothing.add(g, std::move(s), dir.config.decoder.norm_weight_offset_one);
    alpha_sum += alpha;
  }
  for (const auto& [name, tensors] : unscaled) {
    const Observed& in = cal.inputs[name];
    if (in.rows.empty()) return internalError("awq: calibration saw no input of " + name);
    const auto k = static_cast<int64_t>(in.max_abs.size());
    if (k % o.awq_group_size != 0) continue;  // (checkQuantizable refuses such matrices)
    const std::vector<float> ones(static_cast<size_t>(k), 1.0f);
    for (const std::string& m : tensors) LLMRT_RETURN_IF_ERROR(clip(m, in, ones, k));
  }
  const double mean_alpha = groups.empty() ? 0.0 : alpha_sum / static_cast<double>(groups.size());
  char producer[200];
  if (awq)
    std::snprintf(producer, sizeof(producer),
                  "llmrt quantize --method awq --group-size %lld (%lld samples, %lld tokens; "
                  "mean alpha %.2f; %lld matrices clipped)",
                  static_cast<long long>(o.awq_group_size), static_cast<long long>(cal.samples),
                  static_cast<long long>(cal.tokens), mean_alpha, static_cast<long long>(clipped));
  else
    std::snprintf(producer, sizeof(producer), "llmrt quantize --method smoothquant --alpha %g (%lld samples, %lld tokens)",
                  o.alpha, static_cast<long long>(cal.samples), static_cast<long long>(cal.tokens));
  LLMRT_LOG_INFO("%s: %zu groups, calibration text %s", producer, groups.size(), o.calib_file.c_str());
  return writeQuantizedCheckpoint(o, &smoothing, producer, kvScales(cal));
}

// fp8 / int8 with kv_cache_scales: calibration for the KV cache's scales alone.
Result<QuantizeReport> kvCalibratedCheckpoint(const QuantizeOptions& o) {
  LLMRT_ASSIGN_OR_RETURN(ModelDirectory dir, ModelDirectory::open(o.model));
  LLMRT_RETURN_IF_ERROR(checkQuantizable(o, dir));
  LLMRT_RETURN_IF_ERROR(checkQuantizeOutput(o));
  LLMRT_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> samples, calibrationSamples(o, dir));
  LLMRT_ASSIGN_OR_RETURN(Calibration cal, calibrate(dir, samples, {}, o.num_threads, 0, true));
  char producer[160];
  std::snprintf(producer, sizeof(producer), "llmrt quantize --method %s --kv-cache-scales (%lld samples, %lld tokens)",
                o.method.c_str(), static_cast<long long>(cal.samples), static_cast<long long>(cal.tokens));
  return writeQuantizedCheckpoint(o, nullptr, producer, kvScales(cal));
}

}  // namespace

Result<QuantizeReport> quantizeCheckpoint(const QuantizeOptions& o) {
  if (o.method == "smoothquant" || o.method == "awq") return calibratedCheckpoint(o);
  if (o.kv_cache_scales && (o.method == "fp8" || o.method == "int8")) return kvCalibratedCheckpoint(o);
  return writeQuantizedCheckpoint(o, nullptr, "");
}

}  // namespace llmrt
