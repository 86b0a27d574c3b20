#include "tokenizer/sp_model_proto.h"

#include <functional>
#include <utility>

namespace llmrt::tok {
namespace {

// ModelProto field numbers (sentencepiece_model.proto).
constexpr uint32_t kPieces = 1, kTrainerSpec = 2, kNormalizerSpec = 3, kSelfTestData = 4,
                   kDenormalizerSpec = 5;
// ModelProto.SentencePiece: piece = 1 (string), score = 2 (float), type = 3 (enum).
// TrainerSpec: model_type = 3, byte_fallback = 35.
// NormalizerSpec: add_dummy_prefix = 3, remove_extra_whitespaces = 4, escape_whitespaces = 5.

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

struct Field {
  uint32_t number;
  uint32_t wire;
  uint64_t varint;        // kVarint
  std::string_view data;  // kLen
};

// Reads the fields of one message; calls fn(field, offset of its tag) for each.
// Fails on a malformed tag, a varint longer than 10 bytes or a field that runs
// past the end (`base` is the message's offset in the file, for messages).
class WireReader {
 public:
  WireReader(std::string_view bytes, size_t base, std::string_view source, std::string what)
      : b_(bytes), base_(base), source_(source), what_(std::move(what)) {}

  Status forEach(const std::function<Status(const Field&, size_t)>& fn) {
    size_t pos = 0;
    while (pos < b_.size()) {
      const size_t at = pos;
      uint64_t tag;
      if (!varint(pos, tag)) return error(at, "a field tag runs past the end");
      Field f{static_cast<uint32_t>(tag >> 3), static_cast<uint32_t>(tag & 7), 0, {}};
      if (f.number == 0 || (tag >> 3) > 0x1FFFFFFF) return error(at, "invalid field number 0");
      switch (f.wire) {
        case kVarint:
          if (!varint(pos, f.varint))
            return error(at, "field " + std::to_string(f.number) + " (a varint) runs past the end");
          break;
        case kFixed64:
          if (b_.size() - pos < 8)
            return error(at, "field " + std::to_string(f.number) + " (8 bytes) runs past the end");
          pos += 8;
          break;
        case kFixed32:
          if (b_.size() - pos < 4)
            return error(at, "field " + std::to_string(f.number) + " (4 bytes) runs past the end");
          pos += 4;
          break;
        case kLen: {
          uint64_t len;
          if (!varint(pos, len))
            return error(at, "the length of field " + std::to_string(f.number) + " runs past the end");
          if (len > b_.size() - pos) {
            return error(at, "field " + std::to_string(f.number) + " claims " + std::to_string(len) +
                                 " bytes but only " + std::to_string(b_.size() - pos) + " remain");
          }
          f.data = b_.substr(pos, len);
          pos += len;
          break;
        }
        default:
          return error(at, "field " + std::to_string(f.number) + " has wire type " + std::to_string(f.wire) +
                               " (groups or an invalid type)");
      }
      LLMRT_RETURN_IF_ERROR(fn(f, base_ + at));
    }
    return Status::ok();
  }

  Status error(size_t at, const std::string& what) const {
    return parseError(std::string(source_) + ": not a valid SentencePiece model (truncated or corrupt?): " +
                      std::string(what_) + " at byte " + std::to_string(base_ + at) + ": " + what);
  }

 private:
  bool varint(size_t& pos, uint64_t& v) const {
    v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos >= b_.size()) return false;
      const uint8_t c = static_cast<uint8_t>(b_[pos++]);
      if (shift < 64) v |= static_cast<uint64_t>(c & 0x7F) << shift;
      if ((c & 0x80) == 0) return true;
    }
    return false;
  }

  std::string_view b_;
  size_t base_;
  std::string_view source_;
  std::string what_;
};

size_t offsetIn(std::string_view whole, std::string_view part) {
  return static_cast<size_t>(part.data() - whole.data());
}

Status wrongWire(std::string_view source, std::string_view what, size_t at, const Field& f) {
  return parseError(std::string(source) + ": not a valid SentencePiece model (truncated or corrupt?): " +
                    std::string(what) + " at byte " + std::to_string(at) + ": field " +
                    std::to_string(f.number) + " has wire type " + std::to_string(f.wire) +
                    ", not the one sentencepiece_model.proto gives it");
}

}  // namespace

Result<SpModelInfo> scanSpModelProto(std::string_view bytes, std::string_view source) {
  SpModelInfo info;
  if (bytes.empty()) return parseError(std::string(source) + ": empty file; expected a SentencePiece model");
  bool has_trainer = false, has_normalizer = false;
  WireReader top(bytes, 0, source, "ModelProto");
  Status st = top.forEach([&](const Field& f, size_t at) -> Status {
    switch (f.number) {
      case kPieces: {
        if (f.wire != kLen) return wrongWire(source, "ModelProto", at, f);
        ++info.num_pieces;
        WireReader piece(f.data, offsetIn(bytes, f.data), source,
                         "piece " + std::to_string(info.num_pieces - 1));
        return piece.forEach([&](const Field& pf, size_t pat) -> Status {
          const uint32_t want = pf.number == 1   ? kLen
                                : pf.number == 2 ? kFixed32
                                : pf.number == 3 ? kVarint
                                                 : pf.wire;
          if (pf.wire != want) return wrongWire(source, "a piece", pat, pf);
          return Status::ok();
        });
      }
      case kTrainerSpec: {
        if (f.wire != kLen) return wrongWire(source, "ModelProto", at, f);
        has_trainer = true;
        WireReader spec(f.data, offsetIn(bytes, f.data), source, "trainer_spec");
        return spec.forEach([&](const Field& sf, size_t) -> Status {
          if (sf.wire == kVarint && sf.number == 3) info.model_type = static_cast<int>(sf.varint);
          if (sf.wire == kVarint && sf.number == 35) info.byte_fallback = sf.varint != 0;
          return Status::ok();
        });
      }
      case kNormalizerSpec: {
        if (f.wire != kLen) return wrongWire(source, "ModelProto", at, f);
        has_normalizer = true;
        WireReader spec(f.data, offsetIn(bytes, f.data), source, "normalizer_spec");
        return spec.forEach([&](const Field& sf, size_t) -> Status {
          if (sf.wire != kVarint) return Status::ok();
          if (sf.number == 3) info.add_dummy_prefix = sf.varint != 0;
          if (sf.number == 4) info.remove_extra_whitespaces = sf.varint != 0;
          if (sf.number == 5) info.escape_whitespaces = sf.varint != 0;
          return Status::ok();
        });
      }
      case kSelfTestData:
      case kDenormalizerSpec: {
        if (f.wire != kLen) return wrongWire(source, "ModelProto", at, f);
        WireReader sub(f.data, offsetIn(bytes, f.data), source,
                       f.number == kSelfTestData ? "self_test_data" : "denormalizer_spec");
        return sub.forEach([](const Field&, size_t) { return Status::ok(); });
      }
      default:
        return Status::ok();  // an extension or a newer field
    }
  });
  LLMRT_RETURN_IF_ERROR(st);
  std::string missing;
  if (info.num_pieces == 0) missing = "pieces";
  if (!has_trainer) missing += std::string(missing.empty() ? "" : ", ") + "trainer_spec";
  if (!has_normalizer) missing += std::string(missing.empty() ? "" : ", ") + "normalizer_spec";
  if (!missing.empty()) {
    return parseError(std::string(source) + ": not a valid SentencePiece model (truncated or corrupt?): " +
                      std::to_string(bytes.size()) + " bytes with " + std::to_string(info.num_pieces) +
                      " pieces but no " + missing);
  }
  return info;
}

std::string withAddDummyPrefix(std::string_view bytes, bool value) {
  std::string out(bytes);
  // normalizer_spec (field 3, length-delimited) { add_dummy_prefix (field 3, varint) = value }
  out.push_back(static_cast<char>((kNormalizerSpec << 3) | kLen));
  out.push_back(2);
  out.push_back(static_cast<char>((3 << 3) | kVarint));
  out.push_back(value ? 1 : 0);
  return out;
}

}  // namespace llmrt::tok
