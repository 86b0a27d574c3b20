#include "loader/weight_store.h"

#include <algorithm>
#include <filesystem>

#include "core/logging.h"
#include "core/mapped_file.h"
#include "loader/config_parser.h"
#include "loader/json_util.h"

namespace llmrt {

using detail::Json;

namespace {

std::string joinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

bool isSafeRelativePath(const std::string& p) {
  if (p.empty() || p.front() == '/') return false;
  std::filesystem::path path(p);
  for (const auto& part : path) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace

void WeightStore::addEntry(const SafetensorsFile& f, size_t shard, const SafetensorsTensorInfo& info) {
  WeightEntry e;
  e.name = info.name;
  e.dtype = info.dtype;
  e.shape = info.shape;
  e.data = f.dataOf(info);
  e.nbytes = info.nbytes();
  e.shard = shard;
  entries_.push_back(std::move(e));
}

void WeightStore::buildIndex() {
  std::sort(entries_.begin(), entries_.end(),
            [](const WeightEntry& a, const WeightEntry& b) { return a.name < b.name; });
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].name, i);
}

Result<WeightStore> WeightStore::openFile(const std::string& path) {
  LLMRT_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(path));
  WeightStore s;
  s.source_ = path;
  for (const SafetensorsTensorInfo& info : f.tensors()) s.addEntry(f, 0, info);
  s.files_.push_back(std::move(f));
  s.buildIndex();
  return s;
}

Result<std::map<std::string, std::string>> WeightStore::parseIndex(std::string_view text,
                                                                   std::string_view where) {
  LLMRT_ASSIGN_OR_RETURN(Json j, detail::parseInputJson(text, where, kHfJsonLimits));
  if (!j.is_object())
    return parseError(std::string(where) + ": expected a JSON object; got " + jsonSnippet(j));
  auto wm = j.find("weight_map");
  if (wm == j.end()) return parseError(std::string(where) + ": missing field 'weight_map'");
  if (!wm->is_object() || wm->empty()) {
    return Status(StatusCode::kParseError,
                  fieldError(where, "weight_map", jsonSnippet(*wm),
                             "a non-empty object mapping tensor names to shard file names")
                      .message());
  }
  std::map<std::string, std::string> out;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    const std::string field = "weight_map." + printableText(it.key());
    if (!it.value().is_string()) {
      return Status(StatusCode::kParseError,
                    fieldError(where, field, jsonSnippet(it.value()), "a shard file name").message());
    }
    std::string shard = it.value().get<std::string>();
    if (!isSafeRelativePath(shard)) {
      return fieldError(where, field, jsonSnippet(it.value()),
                        "a file name relative to the index's directory (no '..', not absolute)");
    }
    out.emplace(it.key(), std::move(shard));
  }
  return out;
}

Result<WeightStore> WeightStore::openIndex(const std::string& index_path) {
  LLMRT_ASSIGN_OR_RETURN(std::string text, readTextFile(index_path));
  LLMRT_ASSIGN_OR_RETURN(auto weight_map, parseIndex(text, index_path));
  const std::string dir = std::filesystem::path(index_path).parent_path().string();

  // Open each shard once, in name order.
  std::map<std::string, size_t> shard_ids;
  for (const auto& [tensor, shard] : weight_map) shard_ids.emplace(shard, 0);
  WeightStore s;
  s.source_ = index_path;
  for (auto& entry : shard_ids) {
    const std::string& shard = entry.first;  // not a structured binding: clang 14 cannot capture those
    const std::string path = joinPath(dir, shard);
    if (!fileExists(path)) {
      auto first = std::find_if(weight_map.begin(), weight_map.end(),
                                [&](const auto& kv) { return kv.second == shard; });
      return notFound(index_path + ": weight_map maps tensor '" + printableText(first->first) +
                      "' to shard '" + printableText(shard) + "', but " +
                      printableText(path, 400) + " does not exist");
    }
    LLMRT_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(path));
    entry.second = s.files_.size();
    s.files_.push_back(std::move(f));
  }

  size_t listed_in_shards = 0;
  for (const auto& [tensor, shard] : weight_map) {
    const size_t id = shard_ids.at(shard);
    const SafetensorsFile& f = s.files_[id];
    const SafetensorsTensorInfo* info = f.find(tensor);
    if (info == nullptr) {
      return notFound(index_path + ": weight_map lists tensor '" + printableText(tensor) +
                      "' in shard '" + printableText(shard) + "', but " + f.path() +
                      " does not contain it");
    }
    s.addEntry(f, id, *info);
    ++listed_in_shards;
  }
  size_t total_in_shards = 0;
  for (const SafetensorsFile& f : s.files_) total_in_shards += f.tensors().size();
  if (total_in_shards > listed_in_shards) {
    for (size_t id = 0; id < s.files_.size(); ++id) {
      for (const SafetensorsTensorInfo& info : s.files_[id].tensors()) {
        auto it = weight_map.find(info.name);
        if (it == weight_map.end() || shard_ids.at(it->second) != id) {
          LLMRT_LOG_WARNING("%s: tensor '%s' in %s is not listed for that shard in the index; ignored",
                            index_path.c_str(), printableText(info.name).c_str(),
                            s.files_[id].path().c_str());
        }
      }
    }
  }
  s.buildIndex();
  return s;
}

Result<WeightStore> WeightStore::openDirectory(const std::string& dir) {
  const std::string single = joinPath(dir, "model.safetensors");
  if (fileExists(single)) return openFile(single);
  const std::string index = joinPath(dir, "model.safetensors.index.json");
  if (fileExists(index)) return openIndex(index);
  return notFound(dir + ": no model.safetensors or model.safetensors.index.json");
}

const WeightEntry* WeightStore::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

Result<TensorView> WeightStore::tensor(std::string_view name) const {
  const WeightEntry* e = find(name);
  if (e == nullptr) return notFound(source_ + ": no tensor named '" + printableText(name) + "'");
  // The mapping is read-only: TensorView's pointer is non-const by type only.
  return TensorView(const_cast<uint8_t*>(e->data), e->dtype, e->shape, Device::kCpu);
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const WeightEntry& e : entries_) out.push_back(e.name);
  return out;
}

uint64_t WeightStore::totalBytes() const {
  uint64_t n = 0;
  for (const WeightEntry& e : entries_) n += e.nbytes;
  return n;
}

int64_t WeightStore::totalParameters() const {
  int64_t n = 0;
  for (const WeightEntry& e : entries_) n += e.shape.numel();
  return n;
}

std::map<DType, uint64_t> WeightStore::bytesByDtype() const {
  std::map<DType, uint64_t> m;
  for (const WeightEntry& e : entries_) m[e.dtype] += e.nbytes;
  return m;
}

}  // namespace llmrt
