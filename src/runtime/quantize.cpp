// quantizeCheckpoint (include/llmrt/quantize.h): fp8 / int8 straight to the writer
// (loader/quantize_checkpoint.h); smoothquant calibrated here first: the calibration text runs
// through the model on the CPU backend, whose product observer records each product input's
// per-channel max |x| (loader/smoothing.h says which inputs and what is done with them).
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "core/logging.h"
#include "core/mapped_file.h"
#include "llmrt/quantize.h"
#include "llmrt/tokenizer.h"
#include "loader/arch_table.h"
#include "loader/decoder_weights.h"
#include "loader/model_directory.h"
#include "loader/quantize_checkpoint.h"
#include "loader/smoothing.h"
#include "model/decoder_model.h"
#include "runtime/forward_batch.h"
#include "runtime/step_builder.h"

namespace llmrt {
namespace {

struct Calibration {
  std::map<std::string, std::vector<float>> act_max;  // observed weight name -> per-channel max |x|
  int64_t samples = 0, tokens = 0;
};

// Runs `samples` through the model, recording max |x| per channel of the inputs of `observed`.
Result<Calibration> calibrate(const ModelDirectory& dir, const std::vector<std::vector<int32_t>>& samples,
                              const std::vector<std::string>& observed, int threads) {
  Calibration cal;
  CpuBackend cpu(threads);
  for (const std::string& name : observed) cal.act_max[name];
  cpu.setProductObserver([&cal](const std::string& weight, const TensorView& x) {
    auto it = cal.act_max.find(weight);
    if (it == cal.act_max.end()) return;
    const int64_t rows = x.shape[0], cols = x.shape[1];
    std::vector<float>& m = it->second;
    m.resize(static_cast<size_t>(cols), 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x.as<const float>() + r * x.strides[0];
      for (int64_t j = 0; j < cols; ++j) m[static_cast<size_t>(j)] = std::fmax(m[static_cast<size_t>(j)], std::fabs(row[j]));
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
    ++cal.samples;
    cal.tokens += static_cast<int64_t>(s.size());
  }
  return cal;
}

// Per-column max |w| over the group's matrices (checkpoint tensors [out, hidden]).
Result<std::vector<float>> columnMax(const WeightStore& weights, const std::vector<std::string>& names,
                                     std::string_view optional_prefix, int64_t hidden) {
  std::vector<float> m(static_cast<size_t>(hidden), 0.0f), row(static_cast<size_t>(hidden));
  for (const std::string& name : names) {
    std::string found = name;
    if (weights.find(found) == nullptr && !optional_prefix.empty() && name.starts_with(optional_prefix))
      found = name.substr(optional_prefix.size());
    LLMRT_ASSIGN_OR_RETURN(TensorView t, weights.tensor(found));
    if (t.shape.rank() != 2 || t.shape[1] != hidden)
      return invalidArgument("smoothquant: '" + name + "' has shape " + t.shape.toString() + "; expected [rows, " +
                             std::to_string(hidden) + "]");
    const size_t esz = dtypeSize(t.dtype);
    for (int64_t r = 0; r < t.shape[0]; ++r) {
      convertToF32(static_cast<const char*>(t.data) + static_cast<size_t>(r * hidden) * esz, t.dtype, row.data(),
                   row.size());
      for (size_t j = 0; j < row.size(); ++j) m[j] = std::fmax(m[j], std::fabs(row[j]));
    }
  }
  return m;
}

Result<QuantizeReport> smoothQuant(const QuantizeOptions& o) {
  if (!(o.alpha >= 0.0 && o.alpha <= 1.0))
    return invalidArgument("quantize: --alpha has value " + std::to_string(o.alpha) + "; expected a value in [0, 1]");
  if (o.calib_size < 1 || o.calib_seq_len < 1)
    return invalidArgument("quantize: --calib-size and --calib-seq-len must be at least 1 (got " +
                           std::to_string(o.calib_size) + ", " + std::to_string(o.calib_seq_len) + ")");
  if (o.calib_file.empty()) return invalidArgument("quantize: smoothquant needs calibration text (--calib-file)");
  LLMRT_ASSIGN_OR_RETURN(std::string text, readTextFile(o.calib_file));
  LLMRT_ASSIGN_OR_RETURN(ModelDirectory dir, ModelDirectory::open(o.model));
  LLMRT_RETURN_IF_ERROR(checkQuantizable(o, dir));
  LLMRT_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, Tokenizer::fromDirectory(dir.dir));
  if (tok == nullptr) return invalidArgument("quantize: " + o.model + " has no tokenizer to read the calibration text");
  LLMRT_ASSIGN_OR_RETURN(std::vector<TokenId> ids, tok->encode(text, false));
  if (ids.empty()) return invalidArgument("quantize: the calibration text " + o.calib_file + " is empty");
  // Consecutive samples of calib_seq_len tokens (capped by the model's positions).
  const int64_t len = std::min<int64_t>(o.calib_seq_len, dir.config.max_position_embeddings);
  std::vector<std::vector<int32_t>> samples;
  for (size_t at = 0; at < ids.size() && static_cast<int64_t>(samples.size()) < o.calib_size;
       at += static_cast<size_t>(len))
    samples.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(at),
                         ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), at + static_cast<size_t>(len))));

  const std::vector<SmoothingGroup> groups = smoothingGroups(dir.config);
  std::vector<std::string> observed;
  for (const SmoothingGroup& g : groups) observed.push_back(g.observed);
  LLMRT_ASSIGN_OR_RETURN(Calibration cal, calibrate(dir, samples, observed, o.num_threads));

  TensorSmoothing smoothing;
  const std::string_view prefix = archEntry(dir.config.arch).names.optional_prefix;
  for (const SmoothingGroup& g : groups) {
    const std::vector<float>& a = cal.act_max[g.observed];
    if (static_cast<int64_t>(a.size()) != dir.config.hidden_size)
      return internalError("smoothquant: calibration saw no input of " + g.observed);
    LLMRT_ASSIGN_OR_RETURN(std::vector<float> w, columnMax(dir.weights, g.consumers, prefix, dir.config.hidden_size));
    smoothing.add(g, smoothingScales(a, w, o.alpha), dir.config.decoder.norm_weight_offset_one);
  }
  LLMRT_LOG_INFO("smoothquant: alpha %g, %lld calibration samples (%lld tokens of %s), %zu groups smoothed", o.alpha,
                 static_cast<long long>(cal.samples), static_cast<long long>(cal.tokens), o.calib_file.c_str(),
                 groups.size());
  char producer[160];
  std::snprintf(producer, sizeof(producer), "llmrt quantize --method smoothquant --alpha %g (%lld samples, %lld tokens)",
                o.alpha, static_cast<long long>(cal.samples), static_cast<long long>(cal.tokens));
  return writeQuantizedCheckpoint(o, &smoothing, producer);
}

}  // namespace

Result<QuantizeReport> quantizeCheckpoint(const QuantizeOptions& o) {
  if (o.method == "smoothquant") return smoothQuant(o);
  return writeQuantizedCheckpoint(o, nullptr, "");
}

}  // namespace llmrt
