#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace llmrt::tok {
namespace {

size_t totalSize(const std::vector<std::string>& tokens) {
  size_t n = 0;
  for (const std::string& t : tokens) n += t.size();
  return n;
}

class SequenceDecoder : public Decoder {
 public:
  SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps, std::string where)
      : steps_(std::move(steps)), where_(std::move(where)) {}
  Status decodeChain(std::vector<std::string>& tokens) const override {
    // Each Replace is bounded on its own; the bound on the whole chain keeps
    // one step's growth from feeding the next.
    const size_t max_size = maxRewrittenSize(totalSize(tokens) + tokens.size());
    for (const auto& d : steps_) {
      LLMRT_RETURN_IF_ERROR(d->decodeChain(tokens));
      if (totalSize(tokens) > max_size)
        return Status(StatusCode::kResourceExhausted, where_ + ": the decoders grow the text past " +
                                                          std::to_string(max_size) +
                                                          " bytes (16x + 4 KiB, the bound on a rewrite)");
    }
    return Status::ok();
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
  std::string where_;
};

// Characters back to bytes; a token with a character outside the alphabet
// keeps its UTF-8 bytes. The whole result is repaired as lossy UTF-8.
class ByteLevelDecoder : public Decoder {
 public:
  Status decodeChain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens)
      if (!byteLevelDecode(t, bytes)) bytes += t;
    tokens.assign(1, isValidUtf8(bytes) ? std::move(bytes) : utf8Lossy(bytes));
    return Status::ok();
  }
};

// <0xXX> tokens to bytes; a run of them that is not valid UTF-8 becomes one
// U+FFFD per byte.
class ByteFallbackDecoder : public Decoder {
 public:
  Status decodeChain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    size_t run_len = 0;
    auto flush = [&] {
      if (run_len == 0) return;
      if (isValidUtf8(run)) {
        out.push_back(run);
      } else {
        for (size_t i = 0; i < run_len; ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      run.clear();
      run_len = 0;
    };
    for (std::string& t : tokens) {
      int byte = parseByteToken(t);
      if (byte >= 0) {
        run.push_back(static_cast<char>(byte));
        ++run_len;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
    return Status::ok();
  }

 private:
  static int hexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int parseByteToken(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    int hi = hexValue(t[3]), lo = hexValue(t[4]);
    if (hi < 0 || lo < 0) return -1;
    return hi * 16 + lo;
  }
};

class FuseDecoder : public Decoder {
 public:
  Status decodeChain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
    return Status::ok();
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  Status decodeChain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::vector<std::pair<size_t, char32_t>> chars;  // byte offset, code point
      size_t i = 0;
      while (i < t.size()) {
        size_t b = i;
        chars.push_back({b, decodeUtf8(t, i)});
      }
      size_t start_cut = 0;
      for (size_t k = 0; k < start_ && k < chars.size(); ++k) {
        if (chars[k].second != content_) break;
        start_cut = k + 1;
      }
      size_t stop_cut = chars.size();
      for (size_t k = 0; k < stop_ && k < chars.size(); ++k) {
        size_t index = chars.size() - k - 1;
        if (chars[index].second != content_) break;
        stop_cut = index;
      }
      if (start_cut >= stop_cut) {
        t.clear();
        continue;
      }
      size_t from = chars[start_cut].first;
      size_t to = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
      t = t.substr(from, to - from);
    }
    return Status::ok();
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Pattern p, std::string content) : pattern_(std::move(p)), content_(std::move(content)) {}
  Status decodeChain(std::vector<std::string>& tokens) const override {
    // Bounded over the whole list too, not only token by token.
    const size_t max_size = maxRewrittenSize(totalSize(tokens));
    size_t total = 0;
    for (std::string& t : tokens) {
      LLMRT_ASSIGN_OR_RETURN(t, pattern_.replaceAll(t, content_));
      total += t.size();
      if (total > max_size)
        return Status(StatusCode::kResourceExhausted, "a Replace decoder grows the text past " +
                                                          std::to_string(max_size) +
                                                          " bytes (16x + 4 KiB, the bound on a rewrite)");
    }
    return Status::ok();
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool drop_first)
      : replacement_(replacement), drop_first_(drop_first) {}
  Status decodeChain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      const std::string& t = tokens[k];
      std::string out;
      out.reserve(t.size());
      size_t i = 0;
      while (i < t.size()) {
        size_t b = i;
        char32_t c = decodeUtf8(t, i);
        if (c == replacement_) {
          // Every replacement character of the first token goes, as in HF.
          if (!(k == 0 && drop_first_)) out.push_back(' ');
        } else {
          out.append(t, b, i - b);
        }
      }
      tokens[k] = std::move(out);
    }
    return Status::ok();
  }

 private:
  char32_t replacement_;
  bool drop_first_;
};

std::string replaceAllLiteral(std::string s, std::string_view from, std::string_view to) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s, pos, std::string::npos);
  return out;
}

class WordPieceDecoder : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  Status decodeChain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (!prefix_.empty() && t.compare(0, prefix_.size(), prefix_) == 0) {
          t.erase(0, prefix_.size());
        } else if (prefix_.empty()) {
          // replacen("", "", 1) leaves the token as is.
        } else {
          std::string spaced;
          spaced.reserve(t.size() + 1);
          spaced.push_back(' ');
          spaced += t;
          t = std::move(spaced);
        }
      }
      if (cleanup_) {
        static const std::pair<const char*, const char*> kRules[] = {
            {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
            {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
            {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
        for (const auto& [from, to] : kRules) t = replaceAllLiteral(std::move(t), from, to);
      }
    }
    return Status::ok();
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class BpeSuffixDecoder : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  Status decodeChain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = replaceAllLiteral(std::move(tokens[i]), suffix_, i + 1 == tokens.size() ? "" : " ");
    return Status::ok();
  }

 private:
  std::string suffix_;
};

}  // namespace

Result<std::unique_ptr<Decoder>> parseDecoder(const Json& j, const JsonPath& at, int nesting) {
  if (!j.is_object()) return jsonError(at, j, "a decoder object");
  LLMRT_ASSIGN_OR_RETURN(std::string type, jsonString(j, "type", at));
  if (type == "Sequence") {
    if (nesting >= kMaxSequenceNesting) return nestingError(at, "decoders");
    const JsonPath list_at = at.key("decoders");
    const Json* list = jsonFind(j, "decoders");
    if (list == nullptr || !list->is_array())
      return list == nullptr ? jsonMissing(list_at, "an array of decoders")
                             : jsonError(list_at, *list, "an array of decoders");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      LLMRT_ASSIGN_OR_RETURN(auto d, parseDecoder((*list)[i], list_at.index(i), nesting + 1));
      steps.push_back(std::move(d));
    }
    return std::unique_ptr<Decoder>(new SequenceDecoder(std::move(steps), at.source() + ": " + at.path()));
  }
  if (type == "ByteLevel") return std::unique_ptr<Decoder>(new ByteLevelDecoder());
  if (type == "ByteFallback") return std::unique_ptr<Decoder>(new ByteFallbackDecoder());
  if (type == "Fuse") return std::unique_ptr<Decoder>(new FuseDecoder());
  if (type == "Strip") {
    LLMRT_ASSIGN_OR_RETURN(char32_t content, jsonChar(j, "content", at));
    LLMRT_ASSIGN_OR_RETURN(int64_t start, jsonInt(j, "start", at, 0));
    LLMRT_ASSIGN_OR_RETURN(int64_t stop, jsonInt(j, "stop", at, 0));
    if (start < 0) return jsonError(at.key("start"), j["start"], "a count >= 0");
    if (stop < 0) return jsonError(at.key("stop"), j["stop"], "a count >= 0");
    return std::unique_ptr<Decoder>(
        new StripDecoder(content, static_cast<size_t>(start), static_cast<size_t>(stop)));
  }
  if (type == "Replace") {
    const Json* pj = jsonFind(j, "pattern");
    if (pj == nullptr) return jsonMissing(at.key("pattern"), "{\"String\": ...} or {\"Regex\": ...}");
    LLMRT_ASSIGN_OR_RETURN(Pattern p, Pattern::fromJson(*pj, at.key("pattern")));
    LLMRT_ASSIGN_OR_RETURN(std::string content, jsonString(j, "content", at));
    return std::unique_ptr<Decoder>(new ReplaceDecoder(std::move(p), std::move(content)));
  }
  if (type == "Metaspace") {
    LLMRT_ASSIGN_OR_RETURN(char32_t rep, jsonChar(j, "replacement", at, U'\u2581'));
    bool drop_first = true;
    if (const Json* ps = jsonFind(j, "prepend_scheme")) {
      std::string s = ps->is_string() ? ps->get<std::string>() : "";
      if (s != "first" && s != "never" && s != "always")
        return jsonError(at.key("prepend_scheme"), *ps, "one of first, never, always");
      drop_first = s != "never";
    } else if (const Json* aps = jsonFind(j, "add_prefix_space")) {
      if (!aps->is_boolean()) return jsonError(at.key("add_prefix_space"), *aps, "true or false");
      drop_first = aps->get<bool>();
    }
    return std::unique_ptr<Decoder>(new MetaspaceDecoder(rep, drop_first));
  }
  if (type == "WordPiece") {
    LLMRT_ASSIGN_OR_RETURN(std::string prefix, jsonString(j, "prefix", at, std::string("##")));
    LLMRT_ASSIGN_OR_RETURN(bool cleanup, jsonBool(j, "cleanup", at, true));
    return std::unique_ptr<Decoder>(new WordPieceDecoder(std::move(prefix), cleanup));
  }
  if (type == "BPEDecoder") {
    LLMRT_ASSIGN_OR_RETURN(std::string suffix, jsonString(j, "suffix", at, std::string("</w>")));
    return std::unique_ptr<Decoder>(new BpeSuffixDecoder(std::move(suffix)));
  }
  return Status(StatusCode::kUnimplemented,
                fieldError(at.source(), at.key("type").path(), jsonSnippet(Json(type)),
                           "a supported decoder (Sequence, ByteLevel, ByteFallback, Fuse, Strip, Replace, "
                           "Metaspace, WordPiece, BPEDecoder)")
                    .message());
}

}  // namespace llmrt::tok
