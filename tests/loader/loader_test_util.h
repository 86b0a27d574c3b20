// Fixture builders for the loader tests: temp directories, hand-made
// safetensors files, config.json variants and tiny Llama-family checkpoints,
// all written at run time.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "llmrt/model_config.h"
#include "llmrt/status.h"

namespace llmrt::testutil {

using Json = nlohmann::ordered_json;

// A fresh directory under $LLMRT_TEST_TMP (or /tmp), removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }
  // A new empty subdirectory; returns its path.
  std::string subdir(std::string_view name) const;

 private:
  std::string path_;
};

void writeFile(const std::string& path, std::string_view bytes);
std::string readFile(const std::string& path);

template <typename T>
std::string bytesOf(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

struct StTensor {
  std::string name;
  std::string dtype;  // safetensors name, e.g. "F32"
  std::vector<int64_t> shape;
  std::string data;  // raw little-endian bytes
};

// A safetensors file: header {name: {dtype, shape, data_offsets}} with tensors
// laid out back to back in the given order, the header padded with spaces to
// a multiple of 8 bytes (as the reference writer does).
std::string makeSafetensors(const std::vector<StTensor>& tensors,
                            const std::map<std::string, std::string>& metadata = {});
// A safetensors file from a raw header text and data bytes (no padding).
std::string makeSafetensorsRaw(std::string_view header, std::string_view data);

// The tensor's values as float32. The mapped bytes may be unaligned for their
// dtype (safetensors does not align), so they are first copied to aligned storage.
std::vector<float> toF32(const TensorView& t);

// A shape as safetensors' "shape" list.
std::vector<int64_t> dims(const Shape& s);
// Whether `name` is a Llama-family projection matrix ("..._proj.weight"): what quantizers convert.
bool isProjWeight(const std::string& name);

// Float values v[i] = scale * (i - n/2) + offset, converted to `dtype` bytes.
std::string floatData(DType dtype, int64_t n, float scale = 0.25f, float offset = 0.0f);

// config.json objects for a tiny model of each architecture (4.x spelling):
// vocab 32, hidden 16, intermediate 24, 2 layers, 4 heads, 2 kv heads.
Json tinyConfig(std::string_view model_type);

// Writes a checkpoint holding exactly the tensors `config` expects, in `dtype`.
// `shards` > 1 writes model-0000i-of-0000n.safetensors plus the index.
// Tensors named in `skip` are left out; `extra` tensors are added.
struct CheckpointOptions {
  DType dtype = DType::kF32;
  int shards = 1;
  std::set<std::string> skip;
  std::vector<StTensor> extra;
};
void writeCheckpoint(const std::string& dir, const ModelConfig& config,
                     const CheckpointOptions& options = {});

// Writes config.json (and the checkpoint for it) into `dir`; returns the parsed config.
ModelConfig writeModelDir(const std::string& dir, const Json& config_json,
                          const CheckpointOptions& options = {});

// Path of a shared test-data model, or "" when the shared test data is absent.
std::string sharedModelDir(std::string_view name);

inline const Status& statusOf(const Status& s) { return s; }
template <typename T>
const Status& statusOf(const Result<T>& r) {
  return r.status();
}

}  // namespace llmrt::testutil

// Asserts that a Status / Result failed and that its message contains every fragment.
#define EXPECT_ERROR_CONTAINS(expr, ...)                                                  \
  do {                                                                                    \
    const auto& llmrt_r_ = (expr);                                                        \
    ASSERT_FALSE(llmrt_r_.isOk()) << "expected an error";                                 \
    const std::string llmrt_m_ = ::llmrt::testutil::statusOf(llmrt_r_).message();         \
    for (const std::string& llmrt_f_ : std::initializer_list<std::string>{__VA_ARGS__}) { \
      EXPECT_NE(llmrt_m_.find(llmrt_f_), std::string::npos)                               \
          << "message lacks \"" << llmrt_f_ << "\": " << llmrt_m_;                        \
    }                                                                                     \
  } while (0)
