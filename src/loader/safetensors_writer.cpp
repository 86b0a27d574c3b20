#include "loader/safetensors_writer.h"

#include <cstdio>
#include <filesystem>
#include <memory>

#include "core/json.h"

namespace llmrt {

Status writeSafetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsEntry& e : entries) {
    std::vector<int64_t> dims;
    for (int i = 0; i < e.shape.rank(); ++i) dims.push_back(e.shape[i]);
    const uint64_t n = static_cast<uint64_t>(e.shape.numel()) * dtypeSize(e.dtype);
    header[e.name] = {{"dtype", std::string(dtypeName(e.dtype))}, {"shape", dims}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  auto failed = [&](const std::string& what) {
    f.reset();
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return internalError(tmp + ": " + what);
  };
  if (!f) return internalError(tmp + ": cannot create the file");
  const uint64_t len = text.size();
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(len >> (8 * i));
  if (std::fwrite(len_bytes, 1, 8, f.get()) != 8 || std::fwrite(text.data(), 1, text.size(), f.get()) != text.size())
    return failed("write failed (disk full?)");
  std::vector<char> buf;
  for (const SafetensorsEntry& e : entries) {
    buf.clear();
    if (Status s = e.bytes(buf); !s.isOk()) {
      f.reset();
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return s;
    }
    const uint64_t n = static_cast<uint64_t>(e.shape.numel()) * dtypeSize(e.dtype);
    if (buf.size() != n)
      return failed("tensor '" + e.name + "' produced " + std::to_string(buf.size()) + " bytes; expected " +
                    std::to_string(n));
    if (std::fwrite(buf.data(), 1, buf.size(), f.get()) != buf.size()) return failed("write failed (disk full?)");
  }
  if (std::fflush(f.get()) != 0) return failed("write failed (disk full?)");
  f.reset();
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return internalError(path + ": cannot rename the written file into place");
  }
  return Status::ok();
}

}  // namespace llmrt
