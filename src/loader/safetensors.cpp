#include "loader/safetensors.h"

#include <algorithm>

#include "core/logging.h"
#include "loader/json_util.h"

namespace llmrt {

namespace {

using detail::Json;

constexpr std::string_view kKnownDtypes = "one of F32, F16, BF16, F8_E4M3, F64, I8, U8, I16, I32, I64, BOOL";

uint64_t readLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// A header-field problem: fieldError's wording with the given status code.
Status headerFieldError(StatusCode code, std::string_view tensor_where, std::string_view field,
                        std::string_view value, std::string_view expected) {
  return Status(code, fieldError(tensor_where, field, value, expected).message());
}

std::string offsetsText(uint64_t b, uint64_t e) {
  std::string s(1, '[');  // built piecewise: `"[" + std::to_string()` trips GCC 12's -Wrestrict
  s += std::to_string(b);
  s += ", ";
  s += std::to_string(e);
  s += ']';
  return s;
}

Status parseTensorEntry(const std::string& name, const Json& e, uint64_t data_bytes, uint64_t file_bytes,
                        std::string_view where, SafetensorsTensorInfo* out) {
  const std::string tw = std::string(where) + ": tensor '" + printableText(name) + "'";
  if (!e.is_object()) {
    return headerFieldError(StatusCode::kParseError, where, printableText(name), jsonSnippet(e),
                            "an object with dtype, shape and data_offsets");
  }
  out->name = name;

  // dtype
  auto dt_it = e.find("dtype");
  if (dt_it == e.end()) return parseError(tw + ": missing field 'dtype'");
  if (!dt_it->is_string()) {
    return headerFieldError(StatusCode::kParseError, tw, "dtype", jsonSnippet(*dt_it), "a dtype name string");
  }
  std::optional<DType> dt = dtypeFromSafetensorsName(dt_it->get_ref<const std::string&>());
  if (!dt) {
    return headerFieldError(StatusCode::kParseError, tw, "dtype", jsonSnippet(*dt_it),
                            std::string(kKnownDtypes) + " (unknown or unsupported dtype)");
  }
  out->dtype = *dt;

  // shape
  auto sh_it = e.find("shape");
  if (sh_it == e.end()) return parseError(tw + ": missing field 'shape'");
  if (!sh_it->is_array()) {
    return headerFieldError(StatusCode::kParseError, tw, "shape", jsonSnippet(*sh_it),
                            "a list of non-negative integers");
  }
  if (sh_it->size() > static_cast<size_t>(kMaxTensorRank)) {
    return headerFieldError(StatusCode::kParseError, tw, "shape", jsonSnippet(*sh_it),
                            "at most " + std::to_string(kMaxTensorRank) + " dimensions");
  }
  uint64_t numel = 1;
  bool numel_overflow = false;
  for (const Json& d : *sh_it) {
    std::optional<int64_t> v = jsonInt64(d);
    if (!v || *v < 0) {
      return headerFieldError(StatusCode::kParseError, tw, "shape", jsonSnippet(*sh_it),
                              "a list of non-negative integers");
    }
    out->shape.push(*v);
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(*v), &numel)) numel_overflow = true;
  }

  // data_offsets
  auto off_it = e.find("data_offsets");
  if (off_it == e.end()) return parseError(tw + ": missing field 'data_offsets'");
  std::optional<int64_t> b, en;
  if (off_it->is_array() && off_it->size() == 2) {
    b = jsonInt64((*off_it)[0]);
    en = jsonInt64((*off_it)[1]);
  }
  if (!b || !en || *b < 0 || *en < 0) {
    return headerFieldError(StatusCode::kParseError, tw, "data_offsets", jsonSnippet(*off_it),
                            "[begin, end] with non-negative integers");
  }
  out->begin = static_cast<uint64_t>(*b);
  out->end = static_cast<uint64_t>(*en);
  const std::string offs = offsetsText(out->begin, out->end);
  if (out->end < out->begin) {
    return headerFieldError(StatusCode::kInvalidArgument, tw, "data_offsets", offs, "end >= begin");
  }
  if (out->end > data_bytes) {
    return headerFieldError(StatusCode::kOutOfRange, tw, "data_offsets", offs,
                            "offsets within the data buffer of " + std::to_string(data_bytes) +
                                " bytes (end beyond the data: the file is " + std::to_string(file_bytes) +
                                " bytes; truncated?)");
  }
  uint64_t need = 0;
  if (numel_overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(dtypeSize(out->dtype)), &need)) {
    return headerFieldError(StatusCode::kInvalidArgument, tw, "shape", out->shape.toString(),
                            "a shape whose byte size fits in 64 bits");
  }
  if (out->end - out->begin != need) {
    return headerFieldError(StatusCode::kInvalidArgument, tw, "data_offsets", offs,
                            "a span of " + std::to_string(need) + " bytes = shape " + out->shape.toString() +
                                " x " + std::string(dtypeName(out->dtype)) + " (" +
                                std::to_string(dtypeSize(out->dtype)) + " bytes); it spans " +
                                std::to_string(out->end - out->begin) + " bytes");
  }
  return Status::ok();
}

}  // namespace

Result<SafetensorsHeader> parseSafetensors(std::span<const uint8_t> bytes, std::string_view where) {
  const uint64_t size = bytes.size();
  if (size < 8) {
    return parseError(std::string(where) + ": file is " + std::to_string(size) +
                      " bytes, too small for the 8-byte safetensors header length (truncated?)");
  }
  SafetensorsHeader h;
  h.header_bytes = readLe64(bytes.data());
  if (h.header_bytes > kMaxSafetensorsHeaderBytes) {
    return parseError(std::string(where) + ": safetensors header length " + std::to_string(h.header_bytes) +
                      " exceeds the limit of " + std::to_string(kMaxSafetensorsHeaderBytes) +
                      " bytes (corrupt, or not a safetensors file)");
  }
  if (h.header_bytes > size - 8) {
    return outOfRange(std::string(where) + ": safetensors header length " + std::to_string(h.header_bytes) +
                      " goes beyond the end of the file (file size " + std::to_string(size) +
                      " bytes, so at most " + std::to_string(size - 8) + "; truncated?)");
  }
  h.data_offset = 8 + h.header_bytes;
  h.data_bytes = size - h.data_offset;

  // Tensor names must be unique (as must the fields of an entry); the format's
  // entries nest three levels deep, so 16 is generous.
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), h.header_bytes);
  LLMRT_ASSIGN_OR_RETURN(
      Json j, detail::parseInputJson(
                  text, std::string(where) + ": safetensors header",
                  JsonParseLimits{.max_depth = kMaxSafetensorsHeaderDepth, .reject_duplicate_keys = true}));
  if (!j.is_object()) {
    return parseError(std::string(where) + ": safetensors header must be a JSON object; got " +
                      jsonSnippet(j));
  }

  h.tensors.reserve(j.size());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      const Json& m = it.value();
      if (m.is_null()) continue;
      if (!m.is_object()) {
        return headerFieldError(StatusCode::kParseError, where, "__metadata__", jsonSnippet(m),
                                "an object of string values");
      }
      for (auto mit = m.begin(); mit != m.end(); ++mit) {
        if (!mit.value().is_string()) {
          return headerFieldError(StatusCode::kParseError, where,
                                  "__metadata__." + printableText(mit.key()),
                                  jsonSnippet(mit.value()), "a string");
        }
        h.metadata[mit.key()] = mit.value().get<std::string>();
      }
      continue;
    }
    SafetensorsTensorInfo info;
    LLMRT_RETURN_IF_ERROR(parseTensorEntry(it.key(), it.value(), h.data_bytes, size, where, &info));
    h.tensors.push_back(std::move(info));
  }

  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
              if (a.begin != b.begin) return a.begin < b.begin;
              if (a.end != b.end) return a.end < b.end;
              return a.name < b.name;
            });

  // Overlaps are errors; gaps only warnings (the data is still well defined).
  uint64_t cursor = 0;
  const SafetensorsTensorInfo* last = nullptr;
  for (const SafetensorsTensorInfo& t : h.tensors) {
    if (t.begin == t.end) continue;  // empty tensors occupy no bytes
    if (t.begin < cursor) {
      return invalidArgument(std::string(where) + ": tensors '" + printableText(last->name) +
                             "' (data_offsets " + offsetsText(last->begin, last->end) + ") and '" +
                             printableText(t.name) + "' (data_offsets " +
                             offsetsText(t.begin, t.end) + ") overlap");
    }
    if (t.begin > cursor) {
      h.warnings.push_back(std::to_string(t.begin - cursor) + " unused bytes at data offsets " +
                           offsetsText(cursor, t.begin) + " before tensor '" + printableText(t.name) +
                           "'");
    }
    cursor = t.end;
    last = &t;
  }
  if (cursor < h.data_bytes) {
    h.warnings.push_back(std::to_string(h.data_bytes - cursor) +
                         " unused bytes at the end of the data buffer (after offset " +
                         std::to_string(cursor) + ")");
  }
  return h;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  LLMRT_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  LLMRT_ASSIGN_OR_RETURN(SafetensorsHeader header,
                         parseSafetensors(std::span<const uint8_t>(file.data(), file.size()), path));
  for (const std::string& w : header.warnings) LLMRT_LOG_WARNING("%s: %s", path.c_str(), w.c_str());
  SafetensorsFile f;
  f.file_ = std::move(file);
  f.header_ = std::move(header);
  for (size_t i = 0; i < f.header_.tensors.size(); ++i) f.index_.emplace(f.header_.tensors[i].name, i);
  return f;
}

const SafetensorsTensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

Result<TensorView> SafetensorsFile::tensor(std::string_view name) const {
  const SafetensorsTensorInfo* info = find(name);
  if (info == nullptr) return notFound(path() + ": no tensor named '" + printableText(name) + "'");
  // The mapping is read-only: TensorView's pointer is non-const by type only.
  return TensorView(const_cast<uint8_t*>(dataOf(*info)), info->dtype, info->shape, Device::kCpu);
}

}  // namespace llmrt
