// Unit tests of the tokenizer components: UTF-8 repair, regex translation,
// byte fallback, NFC, Metaspace prepend schemes, added-token strip rules,
// StreamDecoder on characters split over byte tokens, and load errors.
// Uses the synthetic tokenizers in tests/data/tokenizer/synthetic (always
// present) and small inline tokenizer.json texts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/test_util.h"
#include "tokenizer/unicode.h"

namespace llmrt::testing {
namespace {

const Tokenizer& synthetic(const std::string& name) {
  const Tokenizer* t = cachedTokenizer(tokenizerDataPath("synthetic/" + name + "/tokenizer.json"));
  if (t == nullptr) throw std::runtime_error("synthetic tokenizer missing: " + name);
  return *t;
}

TokenId idOf(const Tokenizer& t, const std::string& token) {
  auto id = t.tokenToId(token);
  EXPECT_TRUE(id.has_value()) << "no token " << token;
  return id.value_or(-1);
}

// ---- UTF-8 and Unicode helpers --------------------------------------------

TEST(Utf8, LossyRepairMatchesPythonReplace) {
  // bytes.decode("utf-8", "replace") results.
  EXPECT_EQ(tok::utf8Lossy("\xE2\x82"
                           "a"),
            "\xEF\xBF\xBD"
            "a");                                                     // truncated 3-byte sequence
  EXPECT_EQ(tok::utf8Lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");          // one maximal subpart
  EXPECT_EQ(tok::utf8Lossy("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong: two
  EXPECT_EQ(tok::utf8Lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(tok::utf8Lossy("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_TRUE(tok::isValidUtf8("\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(tok::isValidUtf8("\xF4\x90\x80\x80"));
}

TEST(Unicode, NormalizationForms) {
  EXPECT_EQ(tok::normalizeUnicode("e\xCC\x81", tok::NormForm::kNFC), "\xC3\xA9");  // e + acute -> é
  EXPECT_EQ(tok::normalizeUnicode("\xC3\xA9", tok::NormForm::kNFD), "e\xCC\x81");
  EXPECT_EQ(tok::normalizeUnicode("\xEF\xAC\x81", tok::NormForm::kNFKC), "fi");  // ligature
  EXPECT_EQ(tok::normalizeUnicode("plain ascii", tok::NormForm::kNFKD), "plain ascii");
  EXPECT_EQ(tok::toLowerUnicode("ÀÉ İ"), "àé i\xCC\x87");
}

TEST(Regex, OnigClassesTranslated) {
  EXPECT_EQ(tok::onigToPcre2("\\s+"), "[\\t-\\r\\x{85}\\p{Z}]+");
  EXPECT_EQ(tok::onigToPcre2("[^\\s\\p{L}]"), "[^\\t-\\r\\x{85}\\p{Z}\\p{L}]");
  EXPECT_EQ(tok::onigToPcre2("\\Q\\s\\E"), "\\Q\\s\\E");
  auto re = tok::Regex::compile("\\s", "test");
  ASSERT_TRUE(re.isOk());
  size_t s, e;
  // U+180E is whitespace for PCRE2's \s but not for Oniguruma's (HF's engine).
  EXPECT_FALSE(re->find("\xE1\xA0\x8E", 0, s, e).value());
  EXPECT_TRUE(re->find("a\xE3\x80\x80", 0, s, e).value());  // ideographic space
  EXPECT_EQ(s, 1u);
  EXPECT_FALSE(tok::Regex::compile("(unclosed", "test").isOk());
}

// ---- model pieces -----------------------------------------------------------

TEST(ByteFallback, EncodesUnknownCharactersAsBytesAndDecodesThem) {
  const Tokenizer& t = synthetic("sp_metaspace_first");  // decoder: Replace, ByteFallback, Fuse, Strip
  // "€" is not in the synthetic vocabulary: three byte tokens.
  std::vector<TokenId> ids = encodeOk(t, "\xE2\x82\xAC", false);
  std::vector<TokenId> want = {idOf(t, "\xE2\x96\x81"), idOf(t, "<0xE2>"), idOf(t, "<0x82>"),
                               idOf(t, "<0xAC>")};
  EXPECT_EQ(ids, want);
  EXPECT_EQ(t.decode(ids), "\xE2\x82\xAC");
  // An incomplete run decodes to one U+FFFD per byte (HF's ByteFallback rule).
  EXPECT_EQ(t.decode({idOf(t, "<0xE2>"), idOf(t, "<0x82>")}), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(Unknown, FusedAndUnfused) {
  const Tokenizer& fused = synthetic("sp_unk_fused");
  const Tokenizer& unfused = synthetic("sp_unk_unfused");
  TokenId unk = idOf(fused, "<unk>");
  std::vector<TokenId> f = encodeOk(fused, "\xE2\x82\xAC\xE2\x82\xAC", false);  // "▁€€": ▁ then one fused unk
  EXPECT_EQ(f, (std::vector<TokenId>{idOf(fused, "\xE2\x96\x81"), unk}));
  std::vector<TokenId> u = encodeOk(unfused, "\xE2\x82\xAC\xE2\x82\xAC", false);
  EXPECT_EQ(u, (std::vector<TokenId>{idOf(unfused, "\xE2\x96\x81"), unk, unk}));
}

TEST(Normalizer, NfcBeforeTheModel) {
  const Tokenizer* qwen = cachedTokenizer(sharedPath("tokenizers/qwen2-family/tokenizer.json"));
  if (qwen == nullptr) GTEST_SKIP() << "shared Qwen tokenizer absent";
  EXPECT_EQ(encodeOk(*qwen, "Cafe\xCC\x81", false), encodeOk(*qwen, "Caf\xC3\xA9", false));
}

// ---- Metaspace prepend schemes ----------------------------------------------

TEST(Metaspace, PrependSchemes) {
  const std::string meta = "\xE2\x96\x81";
  auto first_token = [](const Tokenizer& t, const std::vector<TokenId>& ids, size_t i) {
    return ids.size() > i ? t.idToToken(ids[i]).value_or("?") : std::string("<none>");
  };
  const Tokenizer& always = synthetic("sp_metaspace_always");
  const Tokenizer& first = synthetic("sp_metaspace_first_split");
  const Tokenizer& never = synthetic("sp_metaspace_never");
  // "always": every segment, also the one after a special token, gets "▁".
  std::vector<TokenId> a = encodeOk(always, "the<s>the", false);
  EXPECT_EQ(first_token(always, a, 0), meta + "the");
  EXPECT_EQ(first_token(always, a, 1), "<s>");
  EXPECT_EQ(first_token(always, a, 2), meta + "the");
  // "first": only the segment at the start of the text.
  std::vector<TokenId> f = encodeOk(first, "the<s>the", false);
  EXPECT_EQ(first_token(first, f, 0), meta + "the");
  EXPECT_EQ(first_token(first, f, 2).rfind(meta, 0), std::string::npos);
  // "never": no "▁" is added.
  std::vector<TokenId> n = encodeOk(never, "the", false);
  EXPECT_EQ(first_token(never, n, 0).rfind(meta, 0), std::string::npos);
  // The Metaspace decoder drops the first token's "▁" unless the scheme is "never".
  EXPECT_EQ(always.decode(encodeOk(always, "the cat", false)), "the cat");
  EXPECT_EQ(never.decode(encodeOk(never, " the", false)), " the");
}

// ---- added tokens -------------------------------------------------------------

TEST(AddedTokens, LstripRstripAndSingleWord) {
  const Tokenizer& t = synthetic("sp_added_flags");
  TokenId mask = idOf(t, "<mask>");
  // <mask> has lstrip and rstrip: the spaces around it belong to it.
  std::vector<TokenId> ids = encodeOk(t, "a <mask> b", false);
  std::vector<TokenId> want = encodeOk(t, "a", false);
  want.push_back(mask);
  want.push_back(idOf(t, "b"));
  EXPECT_EQ(ids, want);
  // [SEP] is single_word: inside a word it is plain text.
  TokenId sep = idOf(t, "[SEP]");
  std::vector<TokenId> inside = encodeOk(t, "x[SEP]y", false);
  EXPECT_EQ(std::count(inside.begin(), inside.end(), sep), 0);
  std::vector<TokenId> alone = encodeOk(t, "x [SEP] y", false);
  EXPECT_EQ(std::count(alone.begin(), alone.end(), sep), 1);
  // Non-special added tokens survive skip_special_tokens; special ones do not.
  EXPECT_FALSE(t.isSpecial(sep));
  EXPECT_TRUE(t.isSpecial(mask));
  EXPECT_EQ(t.decode({mask}, true), "");
  EXPECT_NE(t.decode({sep}, true), "");
}

TEST(AddedTokens, SpecialTokensMatchedBeforeTheModel) {
  const Tokenizer* l3 = cachedTokenizer(sharedPath("tokenizers/llama3/tokenizer.json"));
  if (l3 == nullptr) GTEST_SKIP() << "shared Llama-3 tokenizer absent";
  std::vector<TokenId> ids = encodeOk(*l3, "<|begin_of_text|>Hi<|eot_id|>", false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], 128000);
  EXPECT_EQ(ids[2], 128009);
  EXPECT_EQ(l3->decode(ids, true), "Hi");
  EXPECT_EQ(l3->decode(ids, false), "<|begin_of_text|>Hi<|eot_id|>");
  EXPECT_EQ(l3->vocabSize(), 128256u);
  EXPECT_FALSE(l3->bosId().has_value());  // its post-processor is ByteLevel: nothing added
}

TEST(PostProcessor, TemplateAddsBosAndEos) {
  const Tokenizer& t = synthetic("sp_normalizers");
  EXPECT_EQ(t.specialPrefixIds(), (std::vector<TokenId>{1}));
  EXPECT_EQ(t.specialSuffixIds(), (std::vector<TokenId>{2}));
  EXPECT_EQ(t.bosId(), std::optional<TokenId>(1));
  std::vector<TokenId> plain = encodeOk(t, "hello", false);
  std::vector<TokenId> with = encodeOk(t, "hello", true);
  ASSERT_EQ(with.size(), plain.size() + 2);
  EXPECT_EQ(with.front(), 1);
  EXPECT_EQ(with.back(), 2);
}

TEST(Encode, InvalidUtf8IsReplaced) {
  const Tokenizer& t = synthetic("bl_prefix_space");
  EXPECT_EQ(encodeOk(t,
                     "a\xFF"
                     "b",
                     false),
            encodeOk(t,
                     "a\xEF\xBF\xBD"
                     "b",
                     false));
}

// ---- StreamDecoder ------------------------------------------------------------

TEST(StreamDecoder, HoldsBackSplitCharacters) {
  const Tokenizer& t = synthetic("sp_metaspace_first");
  std::vector<TokenId> ids = {idOf(t, "\xE2\x96\x81the"), idOf(t, "<0xE2>"), idOf(t, "<0x82>"),
                              idOf(t, "<0xAC>"), idOf(t, "\xE2\x96\x81the")};
  StreamDecoder sd(t);
  std::vector<std::string> pieces;
  for (TokenId id : ids) pieces.push_back(sd.step(id));
  pieces.push_back(sd.flush());
  // The byte run stays open until a text token closes it: a following invalid
  // byte would turn the whole run (the € too) into U+FFFD.
  EXPECT_EQ(pieces, (std::vector<std::string>{"the", "", "", "", "\xE2\x82\xAC the", ""}));
}

TEST(StreamDecoder, ByteLevelPiecesAreValidUtf8) {
  const Tokenizer& t = synthetic("bl_prefix_space");
  std::string text = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xE6\x97\xA5\xE6\x9C\xAC";
  std::vector<TokenId> ids = encodeOk(t, text, true);
  StreamDecoder sd(t);
  std::string all;
  size_t held = 0;
  for (TokenId id : ids) {
    std::string p = sd.step(id);
    EXPECT_TRUE(validUtf8(p));
    held += p.empty();
    all += p;
  }
  all += sd.flush();
  EXPECT_EQ(all, t.decode(ids));
  EXPECT_GT(held, 0u);  // multi-byte characters arrive over several byte tokens
}

TEST(StreamDecoder, TrailingIncompleteSequenceComesOutOnFlush) {
  const Tokenizer& t = synthetic("sp_metaspace_first");
  StreamDecoder sd(t);
  EXPECT_EQ(sd.step(idOf(t, "<0xE2>")), "");
  EXPECT_EQ(sd.flush(), "\xEF\xBF\xBD");
}

// ---- load errors ------------------------------------------------------------

std::string minimalModel(const std::string& merges) {
  return R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": )" + merges + "}";
}

Status loadError(const std::string& json) {
  auto t = Tokenizer::fromJson(json, "test.json");
  return t.isOk() ? Status::ok() : t.status();
}

TEST(TokenizerErrors, NotJson) {
  Status s = loadError("{not json");
  EXPECT_EQ(s.code(), StatusCode::kParseError);
  EXPECT_NE(s.message().find("test.json"), std::string::npos);
  EXPECT_NE(s.message().find("invalid JSON"), std::string::npos) << s.message();
}

TEST(TokenizerErrors, MissingModel) {
  Status s = loadError(R"({"version": "1.0", "added_tokens": []})");
  EXPECT_EQ(s.code(), StatusCode::kParseError);
  EXPECT_NE(s.message().find("'model'"), std::string::npos) << s.message();
}

TEST(TokenizerErrors, UnknownModelType) {
  Status s = loadError(R"({"model": {"type": "Unigram", "vocab": []}})");
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("model.type"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Unigram"), std::string::npos) << s.message();
}

TEST(TokenizerErrors, BadMerges) {
  Status three = loadError(R"({"model": )" + minimalModel(R"(["a b c"])") + "}");
  EXPECT_EQ(three.code(), StatusCode::kParseError);
  EXPECT_NE(three.message().find("model.merges[0]"), std::string::npos) << three.message();
  Status missing = loadError(R"({"model": )" + minimalModel(R"(["a b", "b zz"])") + "}");
  EXPECT_EQ(missing.code(), StatusCode::kParseError);
  EXPECT_NE(missing.message().find("model.merges[1]"), std::string::npos) << missing.message();
  EXPECT_NE(missing.message().find("zz"), std::string::npos) << missing.message();
  Status type = loadError(R"({"model": )" + minimalModel(R"([7])") + "}");
  EXPECT_EQ(type.code(), StatusCode::kParseError);
  EXPECT_TRUE(loadError(R"({"model": )" + minimalModel(R"([["a", "b"]])") + "}").isOk());
}

TEST(TokenizerErrors, BadFieldsNamePathAndValue) {
  Status vocab = loadError(R"({"model": {"type": "BPE", "vocab": {"a": -3}, "merges": []}})");
  EXPECT_NE(vocab.message().find("model.vocab.a"), std::string::npos) << vocab.message();
  EXPECT_NE(vocab.message().find("-3"), std::string::npos) << vocab.message();
  Status norm = loadError(R"({"normalizer": {"type": "Precompiled"}, "model": )" + minimalModel("[]") + "}");
  EXPECT_EQ(norm.code(), StatusCode::kUnimplemented);
  EXPECT_NE(norm.message().find("normalizer.type"), std::string::npos) << norm.message();
  Status regex =
      loadError(R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(x"}, "behavior": "Isolated"},
                              "model": )" +
                minimalModel("[]") + "}");
  EXPECT_EQ(regex.code(), StatusCode::kParseError);
  EXPECT_NE(regex.message().find("pre_tokenizer.pattern.Regex"), std::string::npos) << regex.message();
  Status added = loadError(R"({"added_tokens": {"x": 1}, "model": )" + minimalModel("[]") + "}");
  EXPECT_NE(added.message().find("added_tokens"), std::string::npos) << added.message();
  Status root = loadError("[1, 2]");
  EXPECT_EQ(root.code(), StatusCode::kParseError);
}

TEST(TokenizerErrors, MissingFile) {
  auto t = Tokenizer::fromFile("/nonexistent/tokenizer.json");
  ASSERT_FALSE(t.isOk());
  EXPECT_NE(t.status().message().find("/nonexistent/tokenizer.json"), std::string::npos);
}

TEST(Tokenizer, MinimalBpeWithoutDecoderJoinsWithSpaces) {
  auto t = Tokenizer::fromJson(R"({"model": )" + minimalModel(R"(["a b"])") + "}", "min.json");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  EXPECT_EQ(encodeOk(**t, "abab", false), (std::vector<TokenId>{2, 2}));
  EXPECT_EQ(encodeOk(**t, "ba", false), (std::vector<TokenId>{1, 0}));
  EXPECT_EQ((*t)->decode({2, 0}), "ab a");
  EXPECT_EQ((*t)->vocabSize(), 3u);
  EXPECT_EQ((*t)->idToToken(2), std::optional<std::string>("ab"));
  EXPECT_FALSE((*t)->idToToken(99).has_value());
}

}  // namespace
}  // namespace llmrt::testing
