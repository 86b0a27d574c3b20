// quantizeCheckpoint (include/llmrt/quantize.h): a model directory in, an FP8 or INT8 one out.
#include "llmrt/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <unordered_set>

#include "core/fp8.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "loader/arch_table.h"
#include "loader/config_parser.h"
#include "loader/decoder_weights.h"
#include "loader/json_util.h"
#include "loader/model_directory.h"
#include "loader/safetensors_writer.h"

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

// Row-wise symmetric INT8 of a [rows, cols] matrix: scale = max|row| / 127, code =
// round(w / scale) (nearest even), in [-127, 127]; a zero row gets scale 0 and zero codes.
void quantizeRowsInt8(const TensorView& w, std::vector<char>& codes, std::vector<float>& scales) {
  const int64_t rows = w.shape[0], cols = w.shape[1];
  codes.resize(static_cast<size_t>(rows * cols));
  scales.resize(static_cast<size_t>(rows));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    convertToF32(static_cast<const char*>(w.data) + r * w.strides[0] * static_cast<int64_t>(dtypeSize(w.dtype)),
                 w.dtype, row.data(), row.size());
    float amax = 0.0f;
    for (float v : row) amax = std::max(amax, std::fabs(v));
    const float scale = amax / 127.0f;
    scales[static_cast<size_t>(r)] = scale;
    for (int64_t c = 0; c < cols; ++c) {
      const float q = scale > 0.0f ? std::nearbyint(row[static_cast<size_t>(c)] / scale) : 0.0f;
      codes[static_cast<size_t>(r * cols + c)] = static_cast<char>(static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f)));
    }
  }
}

// compressed-tensors' description of what quantizeRows / quantizeRowsInt8 write (vLLM and
// transformers read it): per-channel weights, activations quantized per token at run time.
Json compressedTensorsConfig(bool int8) {
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
      {"producer", int8 ? "llmrt quantize --method int8" : "llmrt quantize --method fp8"}};
}

Status writeTextFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.flush();
  if (!f) return internalError(path + ": write failed (disk full?)");
  return Status::ok();
}

Status prepareOutput(const std::string& model, const std::string& output) {
  std::error_code ec;
  if (output.empty()) return invalidArgument("quantize: --output is empty; expected a new directory");
  if (fs::exists(output, ec)) {
    if (!fs::is_directory(output, ec) || !fs::is_empty(output, ec))
      return invalidArgument("quantize: output '" + output + "' exists and is not an empty directory; name a new one");
    if (fs::equivalent(output, model, ec)) return invalidArgument("quantize: the output is the model directory");
  } else if (!fs::create_directories(output, ec) || ec) {
    return internalError("quantize: cannot create the output directory '" + output + "': " + ec.message());
  }
  return Status::ok();
}

}  // namespace

Result<QuantizeReport> quantizeCheckpoint(const QuantizeOptions& o) {
  if (o.method != "fp8" && o.method != "int8")
    return invalidArgument("quantize: --method has value '" + printableText(o.method, 40) +
                           "'; expected fp8 or int8 (awq and smoothquant are not implemented yet)");
  const bool int8 = o.method == "int8";
  LLMRT_ASSIGN_OR_RETURN(ModelDirectory m, ModelDirectory::open(o.model));
  if (!m.config.weight_quantization.empty() || m.quantization)
    return invalidArgument("quantize: " + o.model + " is already quantized (" +
                           (m.quantization ? m.quantization->describe() : m.config.weight_quantization) +
                           "); start from its 16-bit checkpoint");
  if (archEntry(m.config.arch).names.transposed)
    return invalidArgument("quantize: " + m.config.architecture +
                           " stores its matrices transposed (Conv1D); " + o.method +
                           " quantization of that layout is not implemented");
  LLMRT_RETURN_IF_ERROR(prepareOutput(o.model, o.output));

  std::unordered_set<std::string> products;
  for (const ExpectedTensor& e : expectedTensors(m.config))
    if (e.product_matrix) products.insert(e.name);
  const std::string_view prefix = archEntry(m.config.arch).names.optional_prefix;
  auto isProduct = [&](const std::string& name) {
    return products.count(name) > 0 || (!prefix.empty() && products.count(std::string(prefix) + name) > 0);
  };

  QuantizeReport report;
  std::vector<SafetensorsEntry> entries;
  // One scale buffer, filled when a matrix's codes are produced and written right after them.
  auto scales = std::make_shared<std::vector<float>>();
  for (const WeightEntry& w : m.weights.entries()) {
    const std::string name = w.name;
    report.bytes_in += static_cast<uint64_t>(w.shape.numel()) * dtypeSize(w.dtype);
    const WeightStore* store = &m.weights;
    if (isProduct(name) && w.shape.rank() == 2 && isFloatingPoint(w.dtype)) {
      ++report.quantized_tensors;
      entries.push_back({name, int8 ? DType::kI8 : DType::kF8E4M3, w.shape,
                         [store, name, scales, int8](std::vector<char>& out) -> Status {
                           LLMRT_ASSIGN_OR_RETURN(TensorView t, store->tensor(name));
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
  for (const SafetensorsEntry& e : entries) report.bytes_out += static_cast<uint64_t>(e.shape.numel()) * dtypeSize(e.dtype);

  auto cleanup = [&](Status s) {
    std::error_code ec;
    fs::remove_all(o.output, ec);
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
  (*root)["quantization_config"] = compressedTensorsConfig(int8);
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
