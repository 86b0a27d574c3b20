#include "loader_test_util.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/mapped_file.h"
#include "loader/config_parser.h"
#include "loader/decoder_weights.h"

namespace llmrt::testutil {

namespace fs = std::filesystem;

TempDir::TempDir() {
  const char* base_env = std::getenv("LLMRT_TEST_TMP");
  std::string base = base_env != nullptr && *base_env ? base_env : fs::temp_directory_path().string();
  fs::create_directories(base);
  std::string tmpl = base + "/loader-XXXXXX";
  char* p = mkdtemp(tmpl.data());
  if (p == nullptr) {
    ADD_FAILURE() << "mkdtemp failed under " << base;
    return;
  }
  path_ = p;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string TempDir::subdir(std::string_view name) const {
  std::string p = file(name);
  fs::create_directories(p);
  return p;
}

void writeFile(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) ADD_FAILURE() << "cannot write " << path;
}

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string makeSafetensorsRaw(std::string_view header, std::string_view data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += header;
  out += data;
  return out;
}

std::string makeSafetensors(const std::vector<StTensor>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  std::string data;
  for (const StTensor& t : tensors) {
    const uint64_t begin = data.size();
    data += t.data;
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h += ' ';
  return makeSafetensorsRaw(h, data);
}

std::vector<float> toF32(const TensorView& t) {
  const size_t n = static_cast<size_t>(t.numel());
  std::vector<uint64_t> aligned((t.nbytes() + 7) / 8);
  if (t.nbytes() != 0) std::memcpy(aligned.data(), t.data, t.nbytes());
  std::vector<float> out(n);
  convertToF32(aligned.data(), t.dtype, out.data(), n);
  return out;
}

std::vector<int64_t> dims(const Shape& s) {
  std::vector<int64_t> d;
  for (int i = 0; i < s.rank(); ++i) d.push_back(s[i]);
  return d;
}

bool isProjWeight(const std::string& name) {
  return name.size() > 12 && name.compare(name.size() - 12, 12, "_proj.weight") == 0;
}

std::string floatData(DType dtype, int64_t n, float scale, float offset) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * static_cast<float>(i - n / 2) + offset;
  std::string out(static_cast<size_t>(n) * dtypeSize(dtype), '\0');
  convertFromF32(v.data(), out.data(), dtype, v.size());
  return out;
}

Json tinyConfig(std::string_view model_type) {
  std::string arch = model_type == "llama"     ? "LlamaForCausalLM"
                     : model_type == "mistral" ? "MistralForCausalLM"
                                               : "Qwen2ForCausalLM";
  return Json{{"architectures", {arch}},  {"model_type", model_type}, {"vocab_size", 32},
              {"hidden_size", 16},        {"intermediate_size", 24},  {"num_hidden_layers", 2},
              {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"max_position_embeddings", 64},
              {"rms_norm_eps", 1e-5},     {"rope_theta", 10000.0},    {"tie_word_embeddings", false},
              {"bos_token_id", 1},        {"eos_token_id", 2},        {"torch_dtype", "float32"}};
}

void writeCheckpoint(const std::string& dir, const ModelConfig& config, const CheckpointOptions& o) {
  std::vector<StTensor> all;
  int idx = 0;
  for (const ExpectedTensor& e : expectedTensors(config)) {
    ++idx;
    if (o.skip.count(e.name)) continue;
    StTensor t;
    t.name = e.name;
    t.dtype = std::string(dtypeName(o.dtype));
    for (int i = 0; i < e.shape.rank(); ++i) t.shape.push_back(e.shape[i]);
    t.data = floatData(o.dtype, e.shape.numel(), 0.125f, 0.01f * static_cast<float>(idx));
    all.push_back(std::move(t));
  }
  for (const StTensor& t : o.extra) all.push_back(t);

  if (o.shards <= 1) {
    writeFile(dir + "/model.safetensors", makeSafetensors(all, {{"format", "pt"}}));
    return;
  }
  Json weight_map = Json::object();
  uint64_t total = 0;
  const size_t per = (all.size() + static_cast<size_t>(o.shards) - 1) / static_cast<size_t>(o.shards);
  for (int s = 0; s < o.shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", s + 1, o.shards);
    std::vector<StTensor> part;
    for (size_t i = static_cast<size_t>(s) * per; i < std::min(all.size(), static_cast<size_t>(s + 1) * per);
         ++i) {
      part.push_back(all[i]);
      weight_map[all[i].name] = name;
      total += all[i].data.size();
    }
    writeFile(dir + "/" + name, makeSafetensors(part, {{"format", "pt"}}));
  }
  Json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  writeFile(dir + "/model.safetensors.index.json", index.dump(2));
}

ModelConfig writeModelDir(const std::string& dir, const Json& config_json, const CheckpointOptions& options) {
  const std::string text = config_json.dump(2);
  writeFile(dir + "/config.json", text);
  Result<ModelConfig> cfg = parseModelConfig(text, "config.json");
  if (!cfg.isOk()) {
    ADD_FAILURE() << "fixture config does not parse: " << cfg.status().toString();
    return ModelConfig{};
  }
  writeCheckpoint(dir, *cfg, options);
  return *cfg;
}

std::string sharedModelDir(std::string_view name) {
  std::string p = std::string(LLMRT_SHARED_TESTDATA) + "/models/" + std::string(name);
  return isDirectory(p) ? p : std::string();
}

}  // namespace llmrt::testutil
