#include "tokenizer/normalizer.h"

#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace llmrt::tok {
namespace {

class SequenceNormalizer : public Normalizer {
 public:
  SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps, std::string where)
      : steps_(std::move(steps)), where_(std::move(where)) {}
  Status normalize(std::string& s) const override {
    // Each Replace is bounded on its own; the bound on the whole chain keeps
    // one step's growth from feeding the next.
    const size_t max_size = maxRewrittenSize(s.size());
    for (const auto& n : steps_) {
      LLMRT_RETURN_IF_ERROR(n->normalize(s));
      if (s.size() > max_size)
        return Status(StatusCode::kResourceExhausted, where_ + ": the normalizers grow a text past " +
                                                          std::to_string(max_size) +
                                                          " bytes (16x + 4 KiB, the bound on a rewrite)");
    }
    return Status::ok();
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
  std::string where_;
};

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormForm form) : form_(form) {}
  Status normalize(std::string& s) const override {
    s = normalizeUnicode(s, form_);
    return Status::ok();
  }

 private:
  NormForm form_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  Status normalize(std::string& s) const override {
    s = toLowerUnicode(s);
    return Status::ok();
  }
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string p) : prepend_(std::move(p)) {}
  Status normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prepend_);
    return Status::ok();
  }

 private:
  std::string prepend_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(Pattern p, std::string content) : pattern_(std::move(p)), content_(std::move(content)) {}
  Status normalize(std::string& s) const override {
    LLMRT_ASSIGN_OR_RETURN(s, pattern_.replaceAll(s, content_));
    return Status::ok();
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  Status normalize(std::string& s) const override {
    size_t b = 0, e = s.size();
    if (left_) {
      while (b < e) {
        size_t i = b;
        if (!isWhitespace(decodeUtf8(s, i))) break;
        b = i;
      }
    }
    if (right_) {
      while (e > b) {
        size_t i = e - 1;
        while (i > b && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
        size_t j = i;
        if (!isWhitespace(decodeUtf8(s, j))) break;
        e = i;
      }
    }
    s = s.substr(b, e - b);
    return Status::ok();
  }

 private:
  bool left_, right_;
};

template <typename Pred>
std::string removeChars(std::string_view s, Pred drop) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    char32_t c = decodeUtf8(s, i);
    if (!drop(c)) out.append(s.substr(start, i - start));
  }
  return out;
}

class StripAccentsNormalizer : public Normalizer {
 public:
  Status normalize(std::string& s) const override {
    s = removeChars(s, isMark);
    return Status::ok();
  }
};

class BertNormalizer : public Normalizer {
 public:
  BertNormalizer(bool clean, bool chinese, bool strip_accents, bool lower)
      : clean_(clean), chinese_(chinese), strip_accents_(strip_accents), lower_(lower) {}
  Status normalize(std::string& s) const override {
    if (clean_ || chinese_) {
      std::string out;
      out.reserve(s.size());
      size_t i = 0;
      while (i < s.size()) {
        size_t start = i;
        char32_t c = decodeUtf8(s, i);
        if (clean_) {
          if (c == 0 || c == 0xFFFD || isControl(c)) continue;
          if (isWhitespace(c)) {
            out.push_back(' ');
            continue;
          }
        }
        if (chinese_ && isChineseChar(c)) {
          out.push_back(' ');
          out.append(s, start, i - start);
          out.push_back(' ');
          continue;
        }
        out.append(s, start, i - start);
      }
      s = std::move(out);
    }
    if (strip_accents_) s = removeChars(normalizeUnicode(s, NormForm::kNFD), isNonspacingMark);
    if (lower_) s = toLowerUnicode(s);
    return Status::ok();
  }

 private:
  bool clean_, chinese_, strip_accents_, lower_;
};

class ByteLevelNormalizer : public Normalizer {
 public:
  Status normalize(std::string& s) const override {
    s = byteLevelEncode(s);
    return Status::ok();
  }
};

}  // namespace

Result<std::unique_ptr<Normalizer>> parseNormalizer(const Json& j, const JsonPath& at, int nesting) {
  if (!j.is_object()) return jsonError(at, j, "a normalizer object");
  LLMRT_ASSIGN_OR_RETURN(std::string type, jsonString(j, "type", at));
  if (type == "Sequence") {
    if (nesting >= kMaxSequenceNesting) return nestingError(at, "normalizers");
    const JsonPath list_at = at.key("normalizers");
    const Json* list = jsonFind(j, "normalizers");
    if (list == nullptr || !list->is_array())
      return list == nullptr ? jsonMissing(list_at, "an array of normalizers")
                             : jsonError(list_at, *list, "an array of normalizers");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      LLMRT_ASSIGN_OR_RETURN(auto n, parseNormalizer((*list)[i], list_at.index(i), nesting + 1));
      steps.push_back(std::move(n));
    }
    return std::unique_ptr<Normalizer>(
        new SequenceNormalizer(std::move(steps), at.source() + ": " + at.path()));
  }
  if (type == "NFC") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormForm::kNFC));
  if (type == "NFD") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormForm::kNFD));
  if (type == "NFKC") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormForm::kNFKC));
  if (type == "NFKD") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(NormForm::kNFKD));
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new LowercaseNormalizer());
  if (type == "StripAccents") return std::unique_ptr<Normalizer>(new StripAccentsNormalizer());
  if (type == "ByteLevel") return std::unique_ptr<Normalizer>(new ByteLevelNormalizer());
  if (type == "Prepend") {
    LLMRT_ASSIGN_OR_RETURN(std::string p, jsonString(j, "prepend", at));
    return std::unique_ptr<Normalizer>(new PrependNormalizer(std::move(p)));
  }
  if (type == "Replace") {
    const Json* pj = jsonFind(j, "pattern");
    if (pj == nullptr) return jsonMissing(at.key("pattern"), "{\"String\": ...} or {\"Regex\": ...}");
    LLMRT_ASSIGN_OR_RETURN(Pattern p, Pattern::fromJson(*pj, at.key("pattern")));
    LLMRT_ASSIGN_OR_RETURN(std::string content, jsonString(j, "content", at));
    return std::unique_ptr<Normalizer>(new ReplaceNormalizer(std::move(p), std::move(content)));
  }
  if (type == "Strip") {
    LLMRT_ASSIGN_OR_RETURN(bool left, jsonBool(j, "strip_left", at, true));
    LLMRT_ASSIGN_OR_RETURN(bool right, jsonBool(j, "strip_right", at, true));
    return std::unique_ptr<Normalizer>(new StripNormalizer(left, right));
  }
  if (type == "BertNormalizer") {
    LLMRT_ASSIGN_OR_RETURN(bool clean, jsonBool(j, "clean_text", at, true));
    LLMRT_ASSIGN_OR_RETURN(bool chinese, jsonBool(j, "handle_chinese_chars", at, true));
    LLMRT_ASSIGN_OR_RETURN(bool lower, jsonBool(j, "lowercase", at, true));
    LLMRT_ASSIGN_OR_RETURN(bool strip, jsonBool(j, "strip_accents", at, lower));
    return std::unique_ptr<Normalizer>(new BertNormalizer(clean, chinese, strip, lower));
  }
  return Status(
      StatusCode::kUnimplemented,
      fieldError(at.source(), at.key("type").path(), jsonSnippet(Json(type)),
                 "a supported normalizer (Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, "
                 "Strip, StripAccents, BertNormalizer, ByteLevel)")
          .message());
}

}  // namespace llmrt::tok
