// WeightStore: every tensor of a checkpoint, from one model.safetensors or from
// the shards listed in model.safetensors.index.json, addressed by name and
// memory-mapped (zero-copy on CPU).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "llmrt/status.h"
#include "loader/safetensors.h"

namespace llmrt {

// One tensor of the store: where its bytes are and what they hold.
struct WeightEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  const uint8_t* data = nullptr;  // into a read-only mapping; may be unaligned for dtype
  uint64_t nbytes = 0;
  size_t shard = 0;  // index into WeightStore::files()
};

class WeightStore {
 public:
  WeightStore() = default;
  WeightStore(WeightStore&&) noexcept = default;
  WeightStore& operator=(WeightStore&&) noexcept = default;

  // One .safetensors file.
  static Result<WeightStore> openFile(const std::string& path);
  // A sharded checkpoint from its model.safetensors.index.json: the index's
  // weight_map ({tensor: shard file}) must name existing shard files next to
  // the index, and every tensor listed must be found in its shard. Tensors a
  // shard holds but the index does not list are left out (with a warning).
  static Result<WeightStore> openIndex(const std::string& index_path);
  // `dir`/model.safetensors when present, else `dir`/model.safetensors.index.json
  // (the order HF transformers uses); NotFound when neither exists.
  static Result<WeightStore> openDirectory(const std::string& dir);
  // Parses index.json text: the {tensor name: shard file name} map. Shard
  // names must be relative paths without ".." components. `where` names the file.
  static Result<std::map<std::string, std::string>> parseIndex(std::string_view json_text,
                                                               std::string_view where);

  bool contains(std::string_view name) const { return find(name) != nullptr; }
  const WeightEntry* find(std::string_view name) const;
  // A CPU view of the tensor, pointing into the mapping (zero-copy). The memory
  // is read-only; the view stays valid while this store lives (moves included).
  // NotFound naming the tensor and the checkpoint if absent.
  Result<TensorView> tensor(std::string_view name) const;

  // All tensors, sorted by name.
  const std::vector<WeightEntry>& entries() const { return entries_; }
  std::vector<std::string> names() const;
  size_t size() const { return entries_.size(); }
  uint64_t totalBytes() const;      // sum of tensor data bytes
  int64_t totalParameters() const;  // sum of element counts
  // Bytes per dtype, for a checkpoint description.
  std::map<DType, uint64_t> bytesByDtype() const;

  const std::vector<SafetensorsFile>& files() const { return files_; }
  // The checkpoint's path as given (the file or the index), for messages.
  const std::string& source() const { return source_; }

 private:
  void addEntry(const SafetensorsFile& f, size_t shard, const SafetensorsTensorInfo& info);
  void buildIndex();

  std::string source_;
  std::vector<SafetensorsFile> files_;
  std::vector<WeightEntry> entries_;
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace llmrt
