#include "core/npy.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/mapped_file.h"

namespace llmrt {

Status writeNpyF32(const std::string& path, const float* data, const Shape& shape) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < shape.rank(); ++i) {
    if (i) dict += ", ";
    dict += std::to_string(shape[i]);
  }
  if (shape.rank() == 1) dict += ",";
  dict += "), }";
  // Pad so that magic(6)+version(2)+len(2)+dict+'\n' is a multiple of 64.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return ioError(path + ": cannot open for writing: " + std::strerror(errno));
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const uint16_t hlen = static_cast<uint16_t>(dict.size());
  const unsigned char len_le[2] = {static_cast<unsigned char>(hlen & 0xff), static_cast<unsigned char>(hlen >> 8)};
  const size_t n = static_cast<size_t>(shape.numel());
  bool ok = std::fwrite(magic, 1, 8, f) == 8 && std::fwrite(len_le, 1, 2, f) == 2 &&
            std::fwrite(dict.data(), 1, dict.size(), f) == dict.size() &&
            (n == 0 || std::fwrite(data, sizeof(float), n, f) == n);
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return ioError(path + ": write failed");
  return Status::ok();
}

namespace {
std::string findValue(const std::string& dict, const std::string& key) {
  size_t k = dict.find("'" + key + "'");
  if (k == std::string::npos) return {};
  size_t colon = dict.find(':', k);
  if (colon == std::string::npos) return {};
  size_t start = dict.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) return {};
  if (dict[start] == '(') return dict.substr(start, dict.find(')', start) - start + 1);
  size_t end = dict.find_first_of(",}", start);
  return dict.substr(start, end - start);
}
}  // namespace

Result<NpyArray> parseNpy(const uint8_t* b, size_t size, const std::string& source) {
  if (size < 10 || std::memcmp(b, "\x93NUMPY", 6) != 0) return parseError(source + ": not a .npy file");
  const int major = b[6];
  size_t hlen, off;
  if (major == 1) {
    hlen = b[8] | (b[9] << 8);
    off = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return parseError(source + ": truncated .npy header");
    hlen = b[8] | (b[9] << 8) | (b[10] << 16) | (static_cast<size_t>(b[11]) << 24);
    off = 12;
  } else {
    return parseError(source + ": unsupported .npy version " + std::to_string(major));
  }
  if (off + hlen > size) return parseError(source + ": .npy header longer than the file");
  std::string dict(reinterpret_cast<const char*>(b + off), hlen);
  std::string descr = findValue(dict, "descr");
  std::string fortran = findValue(dict, "fortran_order");
  std::string shape_s = findValue(dict, "shape");
  if (fortran != "False") return parseError(source + ": only C-order .npy arrays are supported");
  if (shape_s.size() < 2 || shape_s.front() != '(') return parseError(source + ": bad shape in .npy header");
  NpyArray arr;
  std::string inner = shape_s.substr(1, shape_s.size() - 2);
  size_t pos = 0;
  while (pos < inner.size()) {
    size_t comma = inner.find(',', pos);
    std::string tok = inner.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    tok.erase(0, tok.find_first_not_of(' '));
    if (!tok.empty()) {
      char* end = nullptr;
      long long d = std::strtoll(tok.c_str(), &end, 10);
      if (end == tok.c_str() || d < 0 || arr.shape.rank() >= kMaxTensorRank)
        return parseError(source + ": bad shape in .npy header: " + shape_s);
      arr.shape.push(d);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  DType dt;
  if (descr == "'<f4'") dt = DType::kF32;
  else if (descr == "'<f8'") dt = DType::kF64;
  else if (descr == "'<f2'") dt = DType::kF16;
  else if (descr == "'<i4'") dt = DType::kI32;
  else if (descr == "'<i8'") dt = DType::kI64;
  else return parseError(source + ": unsupported .npy dtype " + descr);
  const size_t n = static_cast<size_t>(arr.shape.numel());
  const size_t data_off = off + hlen;
  if (data_off + n * dtypeSize(dt) > size) return parseError(source + ": .npy data shorter than its shape");
  arr.data.resize(n);
  std::vector<uint8_t> aligned(b + data_off, b + data_off + n * dtypeSize(dt));
  convertToF32(aligned.data(), dt, arr.data.data(), n);
  return arr;
}

Result<NpyArray> readNpy(const std::string& path) {
  LLMRT_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(path));
  return parseNpy(f.data(), f.size(), path);
}

}  // namespace llmrt
