// Hostile tokenizer.json files: values nested 75,000 deep, 20,000 nested
// Sequences, huge padding lengths and ids, duplicate keys, post-processor ids
// outside the vocabulary, regexes that give up, Replace steps that multiply
// the text. Each must be a one-line error (or, for sparse ids, work) within
// bounded time and memory; the inputs of 1 MB and more are built in memory.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <string>
#include <vector>

#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/test_util.h"

namespace llmrt::testing {
namespace {

using nlohmann::json;

// Wall time and peak-RSS growth of a scope. The peak only rises, so the
// growth seen is at most what the scope itself allocated at once.
class Bounds {
 public:
  Bounds() : start_(std::chrono::steady_clock::now()), rss_kb_(peakRssKb()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  long rssGrowthMb() const { return (peakRssKb() - rss_kb_) / 1024; }

 private:
  static long peakRssKb() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
  }
  std::chrono::steady_clock::time_point start_;
  long rss_kb_;
};

// Generous bounds: the old code took 52 s and 4.3 GB on one of these.
constexpr double kMaxSeconds = 10.0;
constexpr long kMaxRssGrowthMb = 512;

// A BPE model with tokens a, b, ab (ids 0-2), the merge "a b", and `filler`
// more tokens (to make a file of 1 MB and more).
std::string model(size_t filler = 0, const std::string& extra_vocab = "") {
  std::string vocab = R"({"a": 0, "b": 1, "ab": 2, "c": 3)";
  for (size_t i = 0; i < filler; ++i)
    vocab += ", \"filler_token_" + std::to_string(i) + "\": " + std::to_string(4 + i);
  vocab += extra_vocab + "}";
  return R"({"type": "BPE", "vocab": )" + vocab + R"(, "merges": ["a b"]})";
}

Status loadStatus(const std::string& text) {
  auto t = Tokenizer::fromJson(text, "hostile.json");
  return t.isOk() ? Status::ok() : t.status();
}

// An error on one line, of bounded length, that contains every needle.
void expectOneLineError(const Status& s, const std::vector<std::string>& needles) {
  ASSERT_FALSE(s.isOk()) << "expected an error";
  const std::string& m = s.message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_LT(m.size(), 2048u) << m.substr(0, 300);
  EXPECT_EQ(m.rfind("hostile.json", 0), 0u) << m;
  for (const std::string& n : needles)
    EXPECT_NE(m.find(n), std::string::npos) << "no '" << n << "' in: " << m;
}

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// ---- item 10: deep nesting ------------------------------------------------------

TEST(TokenizerLimits, DeepNestingIsAOneLineErrorNotACrash) {
  // 75,000 levels (the issue's 200 KB file; the old code overflowed the stack
  // printing the value in its error) and 600,000 (1.2 MB).
  for (size_t depth : {size_t{75000}, size_t{600000}}) {
    const std::string text = R"({"model": )" + model() + R"(, "normalizer": )" + nested(depth) + "}";
    Bounds b;
    Status s = loadStatus(text);
    expectOneLineError(s, {"nesting deeper than 128 levels", "normalizer"});
    EXPECT_LT(b.seconds(), kMaxSeconds);
    EXPECT_LT(b.rssGrowthMb(), kMaxRssGrowthMb);
  }
  // 128 levels are accepted (tokenizer.json needs about 5).
  EXPECT_TRUE(loadStatus(R"({"model": )" + model() + R"(, "extra": )" + nested(127) + "}").isOk());
}

TEST(TokenizerLimits, ErrorMessagesShowABoundedSnippet) {
  // Deep (within the limit) and long values in a field of the wrong type.
  Status deep = loadStatus(R"({"model": )" + model() + R"(, "normalizer": )" + nested(120) + "}");
  expectOneLineError(deep, {"field 'normalizer'", "[...]"});
  EXPECT_LT(deep.message().size(), 400u) << deep.message();
  const std::string long_string(1 << 20, 'x');
  Status longs = loadStatus(R"({"model": )" + model() + R"(, "decoder": ")" + long_string + "\"}");
  expectOneLineError(longs, {"field 'decoder'", "..."});
  EXPECT_LT(longs.message().size(), 400u);
  // A 1 MB key is cut in the path, control characters are escaped.
  Status key = loadStatus(R"({"model": {"type": "BPE", "vocab": {")" + long_string + R"(\n": -1}}})");
  expectOneLineError(key, {"model.vocab.xxxx", "a token id"});
  EXPECT_LT(key.message().size(), 400u);
}

TEST(TokenizerLimits, ParseErrorsAreOneBoundedLine) {
  // The JSON parser quotes what it read last (here a megabyte), and a
  // duplicate key is named with its path (here with a newline in it).
  Status unterminated = loadStatus(R"({"model": ")" + std::string(1 << 20, 'y'));
  expectOneLineError(unterminated, {"invalid JSON", "..."});
  Status number = loadStatus(R"({"model": )" + std::string(1 << 20, '1') + "}");
  expectOneLineError(number, {"invalid JSON"});
  Status newline_key = loadStatus(R"({"model": )" + model() + R"(, "a\nb": 1, "a\nb": 2})");
  expectOneLineError(newline_key, {"duplicate key 'a"});  // the newline escaped (one line)
}

// ---- item 11: nested Sequences --------------------------------------------------

// `levels` nested Sequences of `kind` around one leaf, as a Json value built
// without recursion.
json nestedSequences(const std::string& list_key, const json& leaf, size_t levels) {
  json root = json::object();
  json* cur = &root;
  for (size_t i = 0; i < levels; ++i) {
    (*cur)["type"] = "Sequence";
    (*cur)[list_key] = json::array({json::object()});
    cur = &(*cur)[list_key][0];
  }
  *cur = leaf;
  return root;
}

// The same as text, built without recursion (nlohmann's dump() recurses).
std::string nestedSequencesText(const std::string& list_key, const json& leaf, size_t levels) {
  std::string s;
  for (size_t i = 0; i < levels; ++i) s += R"({"type": "Sequence", ")" + list_key + R"(": [)";
  s += leaf.dump();
  for (size_t i = 0; i < levels; ++i) s += "]}";
  return s;
}

struct SequenceKind {
  std::string field, list_key, component;
  json leaf;
};

std::vector<SequenceKind> sequenceKinds() {
  return {
      {"pre_tokenizer", "pretokenizers", "pre-tokenizers", {{"type", "WhitespaceSplit"}}},
      {"normalizer", "normalizers", "normalizers", {{"type", "Lowercase"}}},
      {"decoder", "decoders", "decoders", {{"type", "Fuse"}}},
      {"post_processor", "processors", "post-processors", {{"type", "ByteLevel"}}},
  };
}

TEST(TokenizerLimits, TwentyThousandNestedSequencesFailFastAndLinearly) {
  // 20,000 levels (the issue's case) and 40,000 (over 1 MB of compact JSON).
  for (size_t levels : {size_t{20000}, size_t{40000}})
    for (const SequenceKind& k : sequenceKinds()) {
      SCOPED_TRACE(k.field + " x" + std::to_string(levels));
      // As a file: the JSON nesting limit stops it.
      const std::string text = R"({"model": )" + model() + R"(, ")" + k.field + R"(": )" +
                               nestedSequencesText(k.list_key, k.leaf, levels) + "}";
      ASSERT_GT(text.size(), levels * 30);
      if (levels == 40000) ASSERT_GT(text.size(), size_t{1} << 20);
      Bounds b;
      expectOneLineError(loadStatus(text),
                         {"nesting deeper than 128 levels", k.field + "." + k.list_key + "[0]"});
      // As a value already in memory: the Sequence nesting limit stops it.
      json root = {{"model", json::parse(model())}};
      root[k.field] = nestedSequences(k.list_key, k.leaf, levels);
      auto t = tok::HfTokenizer::fromJsonValue(root, "hostile.json");
      ASSERT_FALSE(t.isOk());
      expectOneLineError(t.status(), {"nests Sequence " + k.component + " more than 32 levels deep",
                                      k.field + "." + k.list_key + "[0]." + k.list_key + "[0]"});
      EXPECT_LT(b.seconds(), kMaxSeconds);
      EXPECT_LT(b.rssGrowthMb(), kMaxRssGrowthMb);
    }
}

TEST(TokenizerLimits, ThirtyTwoNestedSequencesAreTheLimit) {
  for (const SequenceKind& k : sequenceKinds()) {
    SCOPED_TRACE(k.field);
    json plain = {{"model", json::parse(model())}};
    plain[k.field] = k.leaf;
    json ok = {{"model", json::parse(model())}};
    ok[k.field] = nestedSequences(k.list_key, k.leaf, 32);
    json too_deep = {{"model", json::parse(model())}};
    too_deep[k.field] = nestedSequences(k.list_key, k.leaf, 33);
    auto p = Tokenizer::fromJson(plain.dump(), "hostile.json");
    auto t = Tokenizer::fromJson(ok.dump(), "hostile.json");
    ASSERT_TRUE(p.isOk()) << p.status().toString();
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    EXPECT_EQ(encodeOk(**t, "ab AB c"), encodeOk(**p, "ab AB c"));
    EXPECT_EQ((*t)->decode({2, 0, 3}), (*p)->decode({2, 0, 3}));
    expectOneLineError(loadStatus(too_deep.dump()), {"more than 32 levels deep"});
  }
}

// ---- item 12: padding lengths and sparse ids ----------------------------------

std::string withPadding(const std::string& padding, size_t filler = 0) {
  return R"({"model": )" + model(filler) + R"(, "padding": )" + padding + "}";
}

TEST(TokenizerLimits, HugePaddingIsALoadError) {
  // In a tokenizer.json of over 1 MB (60,000 filler tokens).
  const size_t filler = 60000;
  ASSERT_GT(withPadding("null", filler).size(), size_t{1} << 20);
  Bounds b;
  expectOneLineError(loadStatus(withPadding(R"({"strategy": {"Fixed": 2147483648}, "pad_id": 0})", filler)),
                     {"padding.strategy.Fixed", "2147483648", "2^20"});
  expectOneLineError(
      loadStatus(withPadding(R"({"strategy": "BatchLongest", "pad_to_multiple_of": 1073741824, "pad_id": 0})",
                             filler)),
      {"padding.pad_to_multiple_of", "1073741824"});
  EXPECT_LT(b.seconds(), kMaxSeconds);
  EXPECT_LT(b.rssGrowthMb(), kMaxRssGrowthMb);
  expectOneLineError(loadStatus(withPadding(R"({"strategy": {"Fixed": -1}})")), {"padding.strategy.Fixed"});
  expectOneLineError(loadStatus(withPadding(R"({"strategy": "Longest"})")),
                     {"padding.strategy", "BatchLongest"});
  expectOneLineError(loadStatus(withPadding(R"({"strategy": "BatchLongest", "pad_id": 999})")),
                     {"padding.pad_id", "999", "vocabulary"});
}

TEST(TokenizerLimits, SanePaddingPadsAsHfDoes) {
  auto fixed = Tokenizer::fromJson(
      withPadding(R"({"strategy": {"Fixed": 6}, "direction": "Left", "pad_id": 3})"), "pad.json");
  ASSERT_TRUE(fixed.isOk()) << fixed.status().toString();
  EXPECT_EQ(encodeOk(**fixed, "abab"), (std::vector<TokenId>{3, 3, 3, 3, 2, 2}));
  auto multiple = Tokenizer::fromJson(
      withPadding(R"({"strategy": "BatchLongest", "pad_to_multiple_of": 4, "pad_id": 3})"), "pad.json");
  ASSERT_TRUE(multiple.isOk()) << multiple.status().toString();
  EXPECT_EQ(encodeOk(**multiple, "aba"), (std::vector<TokenId>{2, 0, 3, 3}));
  EXPECT_EQ(encodeOk(**multiple, "abababab"), (std::vector<TokenId>{2, 2, 2, 2}));
  // The largest length allowed.
  auto big = Tokenizer::fromJson(withPadding(R"({"strategy": {"Fixed": 1048576}, "pad_id": 1})"), "pad.json");
  ASSERT_TRUE(big.isOk()) << big.status().toString();
  std::vector<TokenId> ids = encodeOk(**big, "ab");
  ASSERT_EQ(ids.size(), size_t{1} << 20);
  EXPECT_EQ(ids.front(), 2);
  EXPECT_EQ(ids.back(), 1);
}

TEST(TokenizerLimits, SparseVocabularyIdsCostOnlyTheTokensPresent) {
  // One id of 2^28 (the old code grew its id table to 2^28 entries, 8 GB),
  // in a file of over 1 MB.
  const std::string text = R"({"model": )" + model(60000, R"(, "far": 268435456)") + "}";
  ASSERT_GT(text.size(), size_t{1} << 20);
  Bounds b;
  auto t = Tokenizer::fromJson(text, "sparse.json");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  EXPECT_LT(b.seconds(), kMaxSeconds);
  EXPECT_LT(b.rssGrowthMb(), 256);
  EXPECT_EQ((*t)->vocabSize(), 60005u);
  EXPECT_EQ((*t)->idToToken(268435456), std::optional<std::string>("far"));
  EXPECT_EQ((*t)->tokenToId("far"), std::optional<TokenId>(268435456));
  EXPECT_EQ((*t)->idToToken(2), std::optional<std::string>("ab"));
  EXPECT_FALSE((*t)->idToToken(60004 + 1).has_value());
  EXPECT_EQ((*t)->decode({268435456, 2}), "far ab");
  EXPECT_EQ(encodeOk(**t, "ab"), (std::vector<TokenId>{2}));
  // Beyond 2^28 is still an error.
  expectOneLineError(loadStatus(R"({"model": )" + model(0, R"(, "far": 268435457)") + "}"),
                     {"model.vocab.far", "268435457", "[0, 2^28]"});
}

TEST(TokenizerLimits, ReplaceCannotMultiplyTheText) {
  // Each "a" becomes 10 KB: an added token of 10,000 "a"s (normalized at load)
  // would be 100 MB.
  const std::string content(10000, 'x');
  const std::string norm =
      R"({"type": "Replace", "pattern": {"String": "a"}, "content": ")" + content + "\"}";
  const std::string added =
      R"([{"id": 4, "content": ")" + std::string(10000, 'a') + R"(", "normalized": true, "special": false}])";
  Bounds b;
  expectOneLineError(loadStatus(R"({"model": )" + model() + R"(, "normalizer": )" + norm +
                                R"(, "added_tokens": )" + added + "}"),
                     {"normalizer", "grows it past"});
  // At encode time.
  auto t =
      Tokenizer::fromJson(R"({"model": )" + model() + R"(, "normalizer": )" + norm + "}", "hostile.json");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  auto ids = tryEncode(**t, std::string(10000, 'a'), false);
  ASSERT_FALSE(ids.isOk());
  EXPECT_EQ(ids.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(ids.status().message().find("grows it past"), std::string::npos) << ids.status().message();
  EXPECT_LT(b.rssGrowthMb(), 64);
  // A Sequence of Replaces is bounded as a whole.
  const std::string triple = R"({"type": "Replace", "pattern": {"String": "a"}, "content": "aaa"})";
  auto seq = Tokenizer::fromJson(R"({"model": )" + model() +
                                     R"(, "normalizer": {"type": "Sequence", "normalizers": [)" + triple +
                                     "," + triple + "," + triple + "," + triple + "]}}",
                                 "hostile.json");
  ASSERT_TRUE(seq.isOk()) << seq.status().toString();
  EXPECT_TRUE(tryEncode(**seq, "a", false).isOk());  // 81 bytes: within 16x + 4 KiB
  auto grown = tryEncode(**seq, std::string(1000, 'a'), false);
  ASSERT_FALSE(grown.isOk());
  EXPECT_NE(grown.status().message().find("grow"), std::string::npos) << grown.status().message();
  // An ordinary Replace (Llama-2's " " -> "▁") is unaffected.
  auto sp = Tokenizer::fromJson(
      R"({"model": )" + model() +
          R"(, "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}})",
      "hostile.json");
  ASSERT_TRUE(sp.isOk());
  EXPECT_TRUE(tryEncode(**sp, std::string(100000, ' '), false).isOk());
}

// ---- item 17: duplicate keys, post-processor ids, regex errors ------------------

TEST(TokenizerJson, DuplicateKeysAreRejected) {
  expectOneLineError(loadStatus(R"({"model": )" + model() + R"(, "model": )" + model() + "}"),
                     {"duplicate key 'model'"});
  expectOneLineError(loadStatus(R"({"model": {"type": "BPE", "vocab": {"a": 0, "a": 1}, "merges": []}})"),
                     {"duplicate key 'model.vocab.a'"});
}

TEST(PostProcessorIds, MustLieInTheVocabulary) {
  auto with_post = [](const std::string& post, const std::string& added = "[]") {
    return R"({"model": )" + model() + R"(, "added_tokens": )" + added + R"(, "post_processor": )" + post +
           "}";
  };
  const std::string tmpl =
      R"({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
          "special_tokens": {"<s>": {"id": "<s>", "ids": [IDS], "tokens": [TOKENS]}}})";
  auto make = [&](const std::string& ids, const std::string& tokens) {
    std::string s = tmpl;
    s.replace(s.find("IDS"), 3, ids);
    s.replace(s.find("TOKENS"), 6, tokens);
    return s;
  };
  expectOneLineError(loadStatus(with_post(make("99", R"("<s>")"))),
                     {"post_processor.special_tokens.<s>.ids[0]", "99", "vocabulary"});
  expectOneLineError(loadStatus(with_post(make("1099511627776", R"("<s>")"))),
                     {"post_processor.special_tokens.<s>.ids[0]", "a token id"});
  expectOneLineError(loadStatus(with_post(make("2", R"("ab", "extra")"))),
                     {"post_processor.special_tokens.<s>.tokens", "one per id"});
  expectOneLineError(
      loadStatus(with_post(R"({"type": "BertProcessing", "cls": ["[CLS]", 77], "sep": ["b", 1]})")),
      {"post_processor.cls[1]", "77"});
  expectOneLineError(loadStatus(with_post(R"({"type": "Sequence", "processors": [{"type": "ByteLevel"}, )" +
                                          make("42", R"("<s>")") + "]}")),
                     {"post_processor.processors[1].special_tokens.<s>.ids[0]", "42"});
  // An id of an added token is in the vocabulary (HF gives "<s>" id 4 here).
  auto ok =
      Tokenizer::fromJson(with_post(make("4", R"("<s>")"),
                                    R"([{"id": 4, "content": "<s>", "special": true, "normalized": false}])"),
                          "ok.json");
  ASSERT_TRUE(ok.isOk()) << ok.status().toString();
  EXPECT_EQ(encodeOk(**ok, "ab"), (std::vector<TokenId>{4, 2}));
  EXPECT_EQ((*ok)->specialPrefixIds(), (std::vector<TokenId>{4}));
}

TEST(RegexErrors, MatchLimitIsAnEncodeErrorNotNoMatch) {
  // (a+)+b backtracks exponentially on a run of a's not followed by b: PCRE2
  // stops at its match limit, which the old code took for "no match".
  const std::string split =
      R"({"type": "Split", "pattern": {"Regex": "(a+)+b"}, "behavior": "Isolated", "invert": false})";
  auto t =
      Tokenizer::fromJson(R"({"model": )" + model() + R"(, "pre_tokenizer": )" + split + "}", "regex.json");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  EXPECT_EQ(encodeOk(**t, "aab"), (std::vector<TokenId>{0, 2}));
  const std::string hostile = std::string(40, 'a') + "cb";
  Bounds b;
  auto ids = tryEncode(**t, hostile, false);
  ASSERT_FALSE(ids.isOk()) << "ids: " << idsToString(*ids);
  EXPECT_EQ(ids.status().code(), StatusCode::kResourceExhausted);
  const std::string& m = ids.status().message();
  EXPECT_EQ(m.find('\n'), std::string::npos);
  EXPECT_NE(m.find("regex.json: pre_tokenizer.pattern.Regex"), std::string::npos) << m;
  EXPECT_NE(m.find("limit"), std::string::npos) << m;
  // The same pattern in a Replace normalizer.
  auto n = Tokenizer::fromJson(
      R"({"model": )" + model() +
          R"(, "normalizer": {"type": "Replace", "pattern": {"Regex": "(a+)+b"}, "content": "c"}})",
      "regex.json");
  ASSERT_TRUE(n.isOk()) << n.status().toString();
  auto nids = tryEncode(**n, hostile, false);
  ASSERT_FALSE(nids.isOk());
  EXPECT_NE(nids.status().message().find("regex.json: normalizer.pattern.Regex"), std::string::npos)
      << nids.status().message();
  EXPECT_LT(b.seconds(), kMaxSeconds);
}

}  // namespace
}  // namespace llmrt::testing
