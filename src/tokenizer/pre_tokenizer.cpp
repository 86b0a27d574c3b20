#include "tokenizer/pre_tokenizer.h"

#include <functional>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace llmrt::tok {

void splitBySpans(const Piece& in, const std::vector<Span>& spans, SplitBehavior behavior,
                  std::vector<Piece>& out) {
  auto emit = [&](size_t s, size_t e) {
    if (e > s) out.push_back(Piece{in.text.substr(s, e - s), in.at_origin && s == 0});
  };
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Span& sp : spans)
        if (!sp.match) emit(sp.start, sp.end);
      return;
    case SplitBehavior::kIsolated:
      for (const Span& sp : spans) emit(sp.start, sp.end);
      return;
    case SplitBehavior::kContiguous: {
      // Runs of spans with the same match flag merge into one piece.
      std::vector<std::pair<size_t, size_t>> acc;
      bool prev_match = false;
      for (const Span& sp : spans) {
        if (sp.match == prev_match && !acc.empty())
          acc.back().second = sp.end;
        else
          acc.push_back({sp.start, sp.end});
        prev_match = sp.match;
      }
      for (auto& [s, e] : acc) emit(s, e);
      return;
    }
    case SplitBehavior::kMergedWithPrevious: {
      std::vector<std::pair<size_t, size_t>> acc;
      bool prev_match = false;
      for (const Span& sp : spans) {
        if (sp.match && !prev_match && !acc.empty())
          acc.back().second = sp.end;
        else
          acc.push_back({sp.start, sp.end});
        prev_match = sp.match;
      }
      for (auto& [s, e] : acc) emit(s, e);
      return;
    }
    case SplitBehavior::kMergedWithNext: {
      std::vector<std::pair<size_t, size_t>> acc;  // built from the end
      bool prev_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !prev_match && !acc.empty())
          acc.back().first = it->start;
        else
          acc.push_back({it->start, it->end});
        prev_match = it->match;
      }
      for (auto it = acc.rbegin(); it != acc.rend(); ++it) emit(it->first, it->second);
      return;
    }
  }
}

namespace {

// Spans of a regex / literal pattern over `text`: matches and the gaps between them.
Status patternSpans(const Pattern& p, std::string_view text, bool invert, std::vector<Span>& spans) {
  spans.clear();
  if (text.empty()) {
    spans.push_back({0, 0, false});
    return Status::ok();
  }
  size_t prev = 0;
  auto add = [&](size_t s, size_t e) {
    if (prev != s) spans.push_back({prev, s, invert});
    spans.push_back({s, e, !invert});
    prev = e;
  };
  LLMRT_RETURN_IF_ERROR(p.forEachMatch(text, add));
  if (prev != text.size()) spans.push_back({prev, text.size(), invert});
  return Status::ok();
}

// Spans of a per-character predicate: every matching character is its own
// match span, non-matching runs are single spans (HF's Pattern for Fn(char)).
template <typename Pred>
void charSpans(std::string_view text, Pred pred, std::vector<Span>& spans) {
  spans.clear();
  if (text.empty()) {
    spans.push_back({0, 0, false});
    return;
  }
  size_t last = 0, i = 0;
  while (i < text.size()) {
    size_t b = i;
    char32_t c = decodeUtf8(text, i);
    if (pred(c)) {
      if (last < b) spans.push_back({last, b, false});
      spans.push_back({b, i, true});
      last = i;
    }
  }
  if (last < text.size()) spans.push_back({last, text.size(), false});
}

Result<SplitBehavior> parseBehavior(const Json& j, const JsonPath& at, SplitBehavior fallback) {
  const Json* b = jsonFind(j, "behavior");
  if (b == nullptr) return fallback;
  const char* kExpected = "one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous";
  if (!b->is_string()) return jsonError(at.key("behavior"), *b, kExpected);
  std::string s = b->get<std::string>();
  if (s == "Removed") return SplitBehavior::kRemoved;
  if (s == "Isolated") return SplitBehavior::kIsolated;
  if (s == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (s == "Contiguous") return SplitBehavior::kContiguous;
  return jsonError(at.key("behavior"), *b, kExpected);
}

class SplitStep : public PreTokenizer {
 public:
  SplitStep(Pattern p, SplitBehavior b, bool invert)
      : pattern_(std::move(p)), behavior_(b), invert_(invert) {}
  Status split(const Piece& in, std::vector<Piece>& out, PieceArena&) const override {
    if (!invert_ && (behavior_ == SplitBehavior::kIsolated || behavior_ == SplitBehavior::kRemoved)) {
      // Fast path: no span list needed.
      size_t prev = 0;
      const bool keep_matches = behavior_ == SplitBehavior::kIsolated;
      auto cut = [&](size_t s, size_t e) {
        if (prev != s) out.push_back(Piece{in.text.substr(prev, s - prev), in.at_origin && prev == 0});
        if (keep_matches && e > s) out.push_back(Piece{in.text.substr(s, e - s), in.at_origin && s == 0});
        prev = e;
      };
      LLMRT_RETURN_IF_ERROR(pattern_.forEachMatch(in.text, cut));
      if (prev < in.text.size()) out.push_back(Piece{in.text.substr(prev), in.at_origin && prev == 0});
      return Status::ok();
    }
    thread_local std::vector<Span> spans;
    LLMRT_RETURN_IF_ERROR(patternSpans(pattern_, in.text, invert_, spans));
    splitBySpans(in, spans, behavior_, out);
    return Status::ok();
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class CharSplitStep : public PreTokenizer {
 public:
  CharSplitStep(std::function<bool(char32_t)> pred, SplitBehavior b) : pred_(std::move(pred)), behavior_(b) {}
  Status split(const Piece& in, std::vector<Piece>& out, PieceArena&) const override {
    thread_local std::vector<Span> spans;
    charSpans(in.text, pred_, spans);
    splitBySpans(in, spans, behavior_, out);
    return Status::ok();
  }

 private:
  std::function<bool(char32_t)> pred_;
  SplitBehavior behavior_;
};

// ByteLevel, first half: optional leading space and the GPT-2 split.
class ByteLevelSplit : public PreTokenizer {
 public:
  ByteLevelSplit(bool add_prefix_space, bool use_regex, const Pattern* gpt2)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex), gpt2_(gpt2) {}
  Status split(const Piece& in, std::vector<Piece>& out, PieceArena& arena) const override {
    Piece p = in;
    if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) {
      std::string spaced;
      spaced.reserve(p.text.size() + 1);
      spaced.push_back(' ');
      spaced.append(p.text);
      p.text = arena.keep(std::move(spaced));
    }
    if (!use_regex_) {
      out.push_back(p);
      return Status::ok();
    }
    size_t prev = 0;
    auto cut = [&](size_t s, size_t e) {
      if (prev != s) out.push_back(Piece{p.text.substr(prev, s - prev), p.at_origin && prev == 0});
      if (e > s) out.push_back(Piece{p.text.substr(s, e - s), p.at_origin && s == 0});
      prev = e;
    };
    LLMRT_RETURN_IF_ERROR(gpt2_->forEachMatch(p.text, cut));
    if (prev < p.text.size()) out.push_back(Piece{p.text.substr(prev), p.at_origin && prev == 0});
    return Status::ok();
  }

 private:
  bool add_prefix_space_, use_regex_;
  const Pattern* gpt2_;
};

// ByteLevel, second half: bytes to the GPT-2 alphabet.
class ByteLevelMap : public PreTokenizer {
 public:
  Status split(const Piece& in, std::vector<Piece>& out, PieceArena& arena) const override {
    out.push_back(Piece{arena.keep(byteLevelEncode(in.text)), in.at_origin});
    return Status::ok();
  }
  bool isByteMapping() const override { return true; }
};

enum class PrependScheme { kFirst, kNever, kAlways };

class MetaspaceStep : public PreTokenizer {
 public:
  MetaspaceStep(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), rep_(toUtf8(replacement)), scheme_(scheme), split_(split) {}
  Status split(const Piece& in, std::vector<Piece>& out, PieceArena& arena) const override {
    std::string s;
    s.reserve(in.text.size() + 8);
    for (char c : in.text) {
      if (c == ' ')
        s += rep_;
      else
        s.push_back(c);
    }
    bool starts = s.compare(0, rep_.size(), rep_) == 0;
    if (!starts && (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && in.at_origin)))
      s.insert(0, rep_);
    Piece p{arena.keep(std::move(s)), in.at_origin};
    if (!split_) {
      if (!p.text.empty()) out.push_back(p);
      return Status::ok();
    }
    thread_local std::vector<Span> spans;
    charSpans(
        p.text, [this](char32_t c) { return c == replacement_; }, spans);
    splitBySpans(p, spans, SplitBehavior::kMergedWithNext, out);
    return Status::ok();
  }

 private:
  char32_t replacement_;
  std::string rep_;
  PrependScheme scheme_;
  bool split_;
};

const Pattern& gpt2Pattern() {
  static const Pattern p = [] {
    Json j = {{"Regex", std::string(kGpt2SplitPattern)}};
    return std::move(Pattern::fromJson(j, JsonPath("builtin").key("gpt2"))).value();
  }();
  return p;
}

const Pattern& whitespacePattern() {
  static const Pattern p = [] {
    Json j = {{"Regex", "\\w+|[^\\w\\s]+"}};
    return std::move(Pattern::fromJson(j, JsonPath("builtin").key("whitespace"))).value();
  }();
  return p;
}

}  // namespace

Status parsePreTokenizer(const Json& j, const JsonPath& at, std::vector<std::unique_ptr<PreTokenizer>>& steps,
                         int nesting) {
  if (!j.is_object()) return jsonError(at, j, "a pre_tokenizer object");
  LLMRT_ASSIGN_OR_RETURN(std::string type, jsonString(j, "type", at));
  if (type == "Sequence") {
    if (nesting >= kMaxSequenceNesting) return nestingError(at, "pre-tokenizers");
    const JsonPath list_at = at.key("pretokenizers");
    const Json* list = jsonFind(j, "pretokenizers");
    if (list == nullptr) return jsonMissing(list_at, "an array of pre-tokenizers");
    if (!list->is_array()) return jsonError(list_at, *list, "an array of pre-tokenizers");
    for (size_t i = 0; i < list->size(); ++i)
      LLMRT_RETURN_IF_ERROR(parsePreTokenizer((*list)[i], list_at.index(i), steps, nesting + 1));
    return Status::ok();
  }
  if (type == "ByteLevel") {
    LLMRT_ASSIGN_OR_RETURN(bool add_prefix_space, jsonBool(j, "add_prefix_space", at, true));
    LLMRT_ASSIGN_OR_RETURN(bool use_regex, jsonBool(j, "use_regex", at, true));
    if (add_prefix_space || use_regex)
      steps.push_back(std::make_unique<ByteLevelSplit>(add_prefix_space, use_regex, &gpt2Pattern()));
    steps.push_back(std::make_unique<ByteLevelMap>());
    return Status::ok();
  }
  if (type == "Split") {
    const Json* pj = jsonFind(j, "pattern");
    if (pj == nullptr) return jsonMissing(at.key("pattern"), "{\"String\": ...} or {\"Regex\": ...}");
    LLMRT_ASSIGN_OR_RETURN(Pattern p, Pattern::fromJson(*pj, at.key("pattern")));
    LLMRT_ASSIGN_OR_RETURN(SplitBehavior b, parseBehavior(j, at, SplitBehavior::kIsolated));
    if (jsonFind(j, "behavior") == nullptr) return jsonMissing(at.key("behavior"), "a split behavior");
    LLMRT_ASSIGN_OR_RETURN(bool invert, jsonBool(j, "invert", at, false));
    steps.push_back(std::make_unique<SplitStep>(std::move(p), b, invert));
    return Status::ok();
  }
  if (type == "Metaspace") {
    LLMRT_ASSIGN_OR_RETURN(char32_t rep, jsonChar(j, "replacement", at, U'\u2581'));
    PrependScheme scheme = PrependScheme::kAlways;
    if (const Json* ps = jsonFind(j, "prepend_scheme")) {
      std::string s = ps->is_string() ? ps->get<std::string>() : "";
      if (s == "first")
        scheme = PrependScheme::kFirst;
      else if (s == "never")
        scheme = PrependScheme::kNever;
      else if (s == "always")
        scheme = PrependScheme::kAlways;
      else
        return jsonError(at.key("prepend_scheme"), *ps, "one of first, never, always");
    } else if (const Json* aps = jsonFind(j, "add_prefix_space")) {
      // Files written before prepend_scheme existed.
      if (!aps->is_boolean()) return jsonError(at.key("add_prefix_space"), *aps, "true or false");
      scheme = aps->get<bool>() ? PrependScheme::kAlways : PrependScheme::kNever;
    }
    LLMRT_ASSIGN_OR_RETURN(bool split, jsonBool(j, "split", at, true));
    steps.push_back(std::make_unique<MetaspaceStep>(rep, scheme, split));
    return Status::ok();
  }
  if (type == "Punctuation") {
    LLMRT_ASSIGN_OR_RETURN(SplitBehavior b, parseBehavior(j, at, SplitBehavior::kIsolated));
    steps.push_back(std::make_unique<CharSplitStep>(isPunctuation, b));
    return Status::ok();
  }
  if (type == "Digits") {
    LLMRT_ASSIGN_OR_RETURN(bool individual, jsonBool(j, "individual_digits", at, false));
    steps.push_back(std::make_unique<CharSplitStep>(
        isNumeric, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous));
    return Status::ok();
  }
  if (type == "WhitespaceSplit") {
    steps.push_back(std::make_unique<CharSplitStep>(isWhitespace, SplitBehavior::kRemoved));
    return Status::ok();
  }
  if (type == "Whitespace") {
    // Keeps the regex matches (\w+|[^\w\s]+) and removes what is between them.
    steps.push_back(std::make_unique<SplitStep>(whitespacePattern(), SplitBehavior::kRemoved, true));
    return Status::ok();
  }
  if (type == "BertPreTokenizer") {
    steps.push_back(std::make_unique<CharSplitStep>(isWhitespace, SplitBehavior::kRemoved));
    steps.push_back(std::make_unique<CharSplitStep>(isPunctuation, SplitBehavior::kIsolated));
    return Status::ok();
  }
  if (type == "CharDelimiterSplit") {
    LLMRT_ASSIGN_OR_RETURN(char32_t d, jsonChar(j, "delimiter", at));
    steps.push_back(
        std::make_unique<CharSplitStep>([d](char32_t c) { return c == d; }, SplitBehavior::kRemoved));
    return Status::ok();
  }
  return Status(StatusCode::kUnimplemented,
                fieldError(at.source(), at.key("type").path(), jsonSnippet(Json(type)),
                           "a supported pre-tokenizer (Sequence, ByteLevel, Split, Metaspace, Punctuation, "
                           "Digits, Whitespace, WhitespaceSplit, BertPreTokenizer, CharDelimiterSplit)")
                    .message());
}

}  // namespace llmrt::tok
