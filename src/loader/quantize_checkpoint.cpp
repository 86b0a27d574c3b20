// writeQuantizedCheckpoint (quantize_checkpoint.h): a model directory in, an FP8 or INT8 one out.
#include "loader/quantize_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <unordered_set>

#include "core/fp8.h"
#include "core/int8.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "loader/arch_table.h"
#include "loader/awq_pack.h"
#include "loader/config_parser.h"
#include "loader/decoder_weights.h"
#include "loader/json_util.h"
#include "loader/kv_cache_scales.h"
#include "loader/model_directory.h"
#include "loader/safetensors_writer.h"
#include "loader/smoothing.h"

namespace llmrt {

namespace {

namespace fs = std::filesystem;

// Row-wise FP8 of a [rows, cols] matrix (core/fp8.h's rule): codes (F8_E4M3 bytes) and one
// float32 scale per row.
void quantizeRows(const TensorView& w, std::vector<char>& codes, std::vector<float>& scales) {
  codes.resize(static_cast<size_t>(w.shape[0] * w.shape[1]));
  scales.resize(static_cast<size_t>(w.shape[0]));
  quantizeFp8Rows(w, reinterpret_cast<uint8_t*>(codes.data()), scales.data());
}

// Row-wise symmetric INT8 of a [rows, cols] matrix (core/int8.h's rule): codes and one float32
// scale per row.
void quantizeRowsInt8(const TensorView& w, std::vector<char>& codes, std::vector<float>& scales) {
  codes.resize(static_cast<size_t>(w.shape[0] * w.shape[1]));
  scales.resize(static_cast<size_t>(w.shape[0]));
  quantizeInt8Rows(w, reinterpret_cast<int8_t*>(codes.data()), scales.data());
}

// compressed-tensors' description of what quantizeRows / quantizeRowsInt8 write (vLLM and
// transformers read it): per-channel weights, activations quantized per token at run time.
Json compressedTensorsConfig(bool int8, const std::string& producer) {
  const char* type = int8 ? "int" : "float";
  return Json{
      {"quant_method", "compressed-tensors"},
      {"format", int8 ? "int-quantized" : "float-quantized"},
      {"quantization_status", "compressed"},
      {"ignore", {"lm_head"}},
      {"config_groups",
       {{"group_0",
         {{"targets", {"Linear"}},
          {"weights",
           {{"num_bits", 8}, {"type", type}, {"strategy", "channel"}, {"symmetric", true}, {"dynamic", false}}},
          {"input_activations",
           {{"num_bits", 8}, {"type", type}, {"strategy", "token"}, {"symmetric", true}, {"dynamic", true}}}}}}},
      {"producer", producer}};
}

Status writeTextFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.flush();
  if (!f) return internalError(path + ": write failed (disk full?)");
  return Status::ok();
}

// Creates the output directory when it does not exist (checkQuantizeOutput has passed); `created`
// says whether it did (a failure then removes the directory, else only what was written into it).
Status prepareOutput(const std::string& output, bool* created) {
  std::error_code ec;
  *created = !fs::exists(output, ec);
  if (*created && (!fs::create_directories(output, ec) || ec))
    return internalError("quantize: cannot create the output directory '" + output + "': " + ec.message());
  return Status::ok();
}

}  // namespace

Status checkQuantizeOutput(const QuantizeOptions& o) {
  std::error_code ec;
  if (o.output.empty()) return invalidArgument("quantize: --output is empty; expected a new directory");
  if (fs::exists(o.output, ec)) {
    if (!fs::is_directory(o.output, ec) || !fs::is_empty(o.output, ec))
      return invalidArgument("quantize: output '" + o.output + "' exists and is not an empty directory; name a new one");
    if (fs::equivalent(o.output, o.model, ec)) return invalidArgument("quantize: the output is the model directory");
  }
  return Status::ok();
}

Status checkQuantizable(const QuantizeOptions& o, const ModelDirectory& m) {
  if (!m.config.weight_quantization.empty() || m.quantization)
    return invalidArgument("quantize: " + o.model + " is already quantized (" +
                           (m.quantization ? m.quantization->describe() : m.config.weight_quantization) +
                           "); start from its 16-bit checkpoint");
  if (archEntry(m.config.arch).names.transposed)
    return invalidArgument("quantize: " + m.config.architecture +
                           " stores its matrices transposed (Conv1D); " + o.method +
                           " quantization of that layout is not implemented");
  if (o.method == "awq")
    for (const ExpectedTensor& e : expectedTensors(m.config))
      if (e.product_matrix && (e.shape[0] % 8 != 0 || o.awq_group_size < 1 || e.shape[1] % o.awq_group_size != 0))
        return invalidArgument("quantize: " + e.name + " is " + e.shape.toString() +
                               "; AWQ needs out_features % 8 == 0 and in_features % --group-size (" +
                               std::to_string(o.awq_group_size) + ") == 0");
  return Status::ok();
}

Result<QuantizeReport> writeQuantizedCheckpoint(const QuantizeOptions& o, const TensorSmoothing* smoothing,
                                                const std::string& producer, std::span<const float> kv_scales) {
  if (o.method != "fp8" && o.method != "int8" && o.method != "smoothquant" && o.method != "awq")
    return invalidArgument("quantize: --method has value '" + printableText(o.method, 40) +
                           "'; expected fp8, int8, smoothquant or awq");
  const bool int8 = o.method != "fp8";
  const bool awq = o.method == "awq";
  LLMRT_ASSIGN_OR_RETURN(ModelDirectory m, ModelDirectory::open(o.model));
  LLMRT_RETURN_IF_ERROR(checkQuantizable(o, m));
  LLMRT_RETURN_IF_ERROR(checkQuantizeOutput(o));

  std::unordered_set<std::string> products;
  for (const ExpectedTensor& e : expectedTensors(m.config))
    if (e.product_matrix) products.insert(e.name);
  const std::string_view prefix = archEntry(m.config.arch).names.optional_prefix;
  auto isProduct = [&](const std::string& name) {
    return products.count(name) > 0 || (!prefix.empty() && products.count(std::string(prefix) + name) > 0);
  };
  // The name smoothing knows a checkpoint tensor by ("" when it does not change).
  auto smoothed = [&](const std::string& name) -> std::string {
    if (smoothing == nullptr) return "";
    if (smoothing->touches(name)) return name;
    if (!prefix.empty() && smoothing->touches(std::string(prefix) + name)) return std::string(prefix) + name;
    return "";
  };

  bool created = false;
  LLMRT_RETURN_IF_ERROR(prepareOutput(o.output, &created));

  QuantizeReport report;
  std::vector<SafetensorsEntry> entries;
  // One scale buffer, filled when a matrix's codes are produced and written right after them.
  auto scales = std::make_shared<std::vector<float>>();
  for (const WeightEntry& w : m.weights.entries()) {
    const std::string name = w.name;
    report.bytes_in += static_cast<uint64_t>(w.shape.numel()) * dtypeSize(w.dtype);
    const WeightStore* store = &m.weights;
    const std::string smooth_name = smoothed(name);
    // The tensor as float32 with smoothing applied (into `f`), as a view of `f`.
    auto smoothedView = [store, name, smooth_name, smoothing](std::vector<float>& f) -> Result<TensorView> {
      LLMRT_ASSIGN_OR_RETURN(TensorView t, store->tensor(name));
      f.resize(static_cast<size_t>(t.numel()));
      convertToF32(t.data, t.dtype, f.data(), f.size());
      LLMRT_RETURN_IF_ERROR(smoothing->apply(smooth_name, t.shape, f));
      return TensorView(f.data(), DType::kF32, t.shape);
    };
    if (awq && isProduct(name) && w.shape.rank() == 2 && isFloatingPoint(w.dtype)) {
      // AutoAWQ GEMM: NAME.qweight, NAME.qzeros, NAME.scales (awq_pack.h), computed at the first.
      const int64_t out = w.shape[0], in = w.shape[1], group = o.awq_group_size;  // (checkQuantizable)
      ++report.quantized_tensors;
      const std::string base = name.substr(0, name.size() - 6);  // without "weight"
      auto packed = std::make_shared<AwqPacked>();
      entries.push_back({base + "qweight", DType::kI32, Shape{in, out / 8},
                         [store, name, smooth_name, smoothedView, packed, out, in, group](std::vector<char>& bytes) -> Status {
                           std::vector<float> f;
                           TensorView t;
                           if (!smooth_name.empty()) {
                             LLMRT_ASSIGN_OR_RETURN(t, smoothedView(f));
                           } else {
                             LLMRT_ASSIGN_OR_RETURN(TensorView src, store->tensor(name));
                             f.resize(static_cast<size_t>(src.numel()));
                             convertToF32(src.data, src.dtype, f.data(), f.size());
                           }
                           *packed = packAwq(f.data(), out, in, group);
                           const char* p = reinterpret_cast<const char*>(packed->qweight.data());
                           bytes.assign(p, p + packed->qweight.size() * sizeof(uint32_t));
                           return Status::ok();
                         }});
      entries.push_back({base + "qzeros", DType::kI32, Shape{in / group, out / 8}, [packed](std::vector<char>& bytes) {
                           const char* p = reinterpret_cast<const char*>(packed->qzeros.data());
                           bytes.assign(p, p + packed->qzeros.size() * sizeof(uint32_t));
                           return Status::ok();
                         }});
      entries.push_back({base + "scales", DType::kF16, Shape{in / group, out}, [packed](std::vector<char>& bytes) {
                           const char* p = reinterpret_cast<const char*>(packed->scales.data());
                           bytes.assign(p, p + packed->scales.size() * sizeof(uint16_t));
                           *packed = AwqPacked{};
                           return Status::ok();
                         }});
    } else if (isProduct(name) && w.shape.rank() == 2 && isFloatingPoint(w.dtype)) {
      ++report.quantized_tensors;
      entries.push_back({name, int8 ? DType::kI8 : DType::kF8E4M3, w.shape,
                         [store, name, scales, int8, smooth_name, smoothedView](std::vector<char>& out) -> Status {
                           TensorView t;
                           std::vector<float> f;
                           if (!smooth_name.empty()) {
                             LLMRT_ASSIGN_OR_RETURN(t, smoothedView(f));
                           } else {
                             LLMRT_ASSIGN_OR_RETURN(t, store->tensor(name));
                           }
                           if (int8)
                             quantizeRowsInt8(t, out, *scales);
                           else
                             quantizeRows(t, out, *scales);
                           return Status::ok();
                         }});
      entries.push_back({name + "_scale", DType::kF32, Shape{w.shape[0], 1}, [scales](std::vector<char>& out) {
                           out.resize(scales->size() * sizeof(float));
                           std::memcpy(out.data(), scales->data(), out.size());
                           return Status::ok();
                         }});
    } else if (!smooth_name.empty()) {
      // A smoothed norm: float32 (a 16-bit (1 + w) / s - 1 would lose Gemma's weights).
      ++report.copied_tensors;
      entries.push_back({name, DType::kF32, w.shape, [smoothedView](std::vector<char>& out) -> Status {
                           std::vector<float> f;
                           LLMRT_ASSIGN_OR_RETURN(TensorView t, smoothedView(f));
                           out.resize(f.size() * sizeof(float));
                           std::memcpy(out.data(), t.data, out.size());
                           return Status::ok();
                         }});
    } else {
      ++report.copied_tensors;
      entries.push_back({name, w.dtype, w.shape, [store, name](std::vector<char>& out) -> Status {
                           LLMRT_ASSIGN_OR_RETURN(TensorView t, store->tensor(name));
                           const char* p = static_cast<const char*>(t.data);
                           out.assign(p, p + t.nbytes());
                           return Status::ok();
                         }});
    }
  }
  if (!kv_scales.empty() && static_cast<int64_t>(kv_scales.size()) != 2 * m.config.num_hidden_layers)
    return internalError("quantize: " + std::to_string(kv_scales.size()) + " KV cache scales for " +
                         std::to_string(m.config.num_hidden_layers) + " layers");
  for (size_t i = 0; i < kv_scales.size(); ++i) {
    const float s = kv_scales[i];
    entries.push_back({kvCacheScaleName(m.config, static_cast<int64_t>(i / 2), static_cast<int>(i % 2)), DType::kF32,
                       Shape{}, [s](std::vector<char>& out) {
                         out.resize(sizeof(float));
                         std::memcpy(out.data(), &s, sizeof(float));
                         return Status::ok();
                       }});
    ++report.kv_cache_scales;
  }
  for (const SafetensorsEntry& e : entries) report.bytes_out += static_cast<uint64_t>(e.shape.numel()) * dtypeSize(e.dtype);

  auto cleanup = [&](Status s) {
    std::error_code ec;
    if (created) {
      fs::remove_all(o.output, ec);
    } else {  // (the directory was empty: everything in it is this run's)
      for (const fs::directory_entry& f : fs::directory_iterator(o.output, ec)) fs::remove_all(f.path(), ec);
    }
    return s;
  };
  if (Status s = writeSafetensors((fs::path(o.output) / "model.safetensors").string(), entries); !s.isOk())
    return cleanup(s);

  // config.json with the quantization_config; every other file (tokenizer, generation config,
  // chat template, README, ...) as it is. Weight files and the shard index are not copied.
  const std::string config_path = (fs::path(o.model) / "config.json").string();
  Result<std::string> text = readTextFile(config_path);
  if (!text.isOk()) return cleanup(text.status());
  Result<Json> root = detail::parseInputJson(*text, config_path, kHfJsonLimits);
  if (!root.isOk()) return cleanup(root.status());
  if (awq) {
    (*root)["quantization_config"] = Json{{"quant_method", "awq"}, {"bits", 4}, {"group_size", o.awq_group_size},
                                          {"version", "gemm"}, {"zero_point", true},
                                          {"producer", producer.empty() ? "llmrt quantize --method awq" : producer}};
  } else {
    (*root)["quantization_config"] =
        compressedTensorsConfig(int8, producer.empty() ? "llmrt quantize --method " + o.method : producer);
    if (!kv_scales.empty())  // (compressed-tensors' name for per-tensor static FP8 KV scales)
      (*root)["quantization_config"]["kv_cache_scheme"] = Json{
          {"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}, {"dynamic", false}, {"symmetric", true}};
  }
  if (Status s = writeTextFile((fs::path(o.output) / "config.json").string(), root->dump(2) + "\n"); !s.isOk())
    return cleanup(s);
  std::error_code ec;
  for (const fs::directory_entry& f : fs::directory_iterator(o.model, ec)) {
    const std::string file = f.path().filename().string();
    if (!f.is_regular_file() || file == "config.json" || file.ends_with(".safetensors") ||
        file == "model.safetensors.index.json" || file.ends_with(".bin") || file.ends_with(".pt"))
      continue;
    fs::copy_file(f.path(), fs::path(o.output) / file, fs::copy_options::overwrite_existing, ec);
    if (ec) return cleanup(internalError("quantize: cannot copy " + f.path().string() + ": " + ec.message()));
  }
  if (ec) return cleanup(internalError("quantize: cannot list " + o.model + ": " + ec.message()));
  return report;
}

}  // namespace llmrt
