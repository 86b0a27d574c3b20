// SentencePiece tokenizer.model files through libsentencepiece: the real
// models of ../shared/testdata against Python sentencepiece's ids
// (expected_ids.json, and tests/data/tokenizer/sentencepiece_ids.json from
// scripts/golden/make_tokenizer_model_ids.py when present), parity with the
// tokenizer.json HF converted from the same model, tokenizer_config.json's
// switches and added tokens, directory precedence, and one-line errors for
// truncated or corrupt files. Skips when the build has no SentencePiece or the
// shared data is absent.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/file_tokenizer_util.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/test_util.h"

namespace llmrt::testing {
namespace {

using nlohmann::json;

#define SKIP_WITHOUT_SENTENCEPIECE()                                                                  \
  if (!tok::sentencePieceSupported())                                                                 \
  GTEST_SKIP() << "this build has no SentencePiece (LLMRT_SENTENCEPIECE=OFF or libsentencepiece-dev " \
                  "missing)"

std::vector<TokenId> toIds(const json& j) {
  std::vector<TokenId> ids;
  for (const json& x : j) ids.push_back(x.get<TokenId>());
  return ids;
}

// SentencePiece's remove_extra_whitespaces: runs of spaces become one, none at either end.
std::string collapseSpaces(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out.push_back(c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// nullptr without SentencePiece or the shared file; fromFile dispatches *.model / *.model.* to SentencePiece.
const Tokenizer* cachedSp(const std::string& rel) {
  if (!tok::sentencePieceSupported() || !pathExists(sharedPath(rel))) return nullptr;
  return cachedTokenizer(sharedPath(rel));
}

struct SpModel {
  std::string name;
  std::string rel;           // the .model file under the shared test data
  std::string expected_key;  // its entry in expected_ids.json
  bool collapses_spaces;     // remove_extra_whitespaces
};
void PrintTo(const SpModel& m, std::ostream* os) { *os << m.name; }

const std::vector<SpModel>& spModels() {
  static const std::vector<SpModel> list = {
      {"llama2", "tokenizers/llama2/tokenizer.model", "tokenizers/llama2/tokenizer.model", false},
      {"mistral_v1", "tokenizers/mistral/tokenizer.model.v1", "tokenizers/mistral/tokenizer.model.v1", false},
      {"mistral_v3", "tokenizers/mistral/tokenizer.model.v3", "tokenizers/mistral/tokenizer.model.v3", false},
      // tok512.model is byte-identical to models/stories260K-hf/tokenizer.model.
      {"tok512", "models/llama2c/tok512.model", "models/stories260K-hf/tokenizer.model", true},
  };
  return list;
}

class SpReal : public ::testing::TestWithParam<SpModel> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_SENTENCEPIECE();
    if (!pathExists(sharedPath(GetParam().rel)))
      GTEST_SKIP() << "shared test data absent: " << sharedPath(GetParam().rel);
    tok_ = cachedTokenizer(sharedPath(GetParam().rel));
    ASSERT_NE(tok_, nullptr);
  }
  const Tokenizer* tok_ = nullptr;
};

// Python sentencepiece's sp.encode(text) for every string of strings.json
// (recorded in expected_ids.json); with add_special_tokens, BOS (1) first;
// decode gives the text back (after remove_extra_whitespaces where the model has it).
TEST_P(SpReal, MatchesSentencePieceIds) {
  const SpModel& m = GetParam();
  const std::string expected_path = sharedPath("tokenizers/tests/expected_ids.json");
  const std::string strings_path = sharedPath("tokenizers/tests/strings.json");
  if (!pathExists(expected_path) || !pathExists(strings_path)) GTEST_SKIP() << "absent: " << expected_path;
  const json expected = readJsonFile(expected_path);
  const json strings = readJsonFile(strings_path);
  ASSERT_TRUE(expected["tokenizers"].contains(m.expected_key)) << m.expected_key;
  const json& ids = expected["tokenizers"][m.expected_key]["ids"];
  ASSERT_EQ(ids.size(), strings.size());
  EXPECT_EQ(tok_->specialPrefixIds(), std::vector<TokenId>{1});
  EXPECT_TRUE(tok_->specialSuffixIds().empty());
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::string text = strings[i]["text"].get<std::string>();
    const std::vector<TokenId> want = toIds(ids[i]);
    EXPECT_EQ(encodeOk(*tok_, text, false), want)
        << m.name << " string " << i << " " << escapeForMessage(text);
    std::vector<TokenId> with_bos{1};
    with_bos.insert(with_bos.end(), want.begin(), want.end());
    EXPECT_EQ(encodeOk(*tok_, text, true), with_bos) << m.name << " string " << i;
    EXPECT_EQ(tok_->decode(want), m.collapses_spaces ? collapseSpaces(text) : text)
        << m.name << " string " << i;
    EXPECT_EQ(tok_->decode(with_bos, true), tok_->decode(want));
  }
}

// The same models through the reference ids of scripts/golden/make_tokenizer_model_ids.py.
TEST_P(SpReal, MatchesPythonFixture) {
  const SpModel& m = GetParam();
  const std::string fixture = tokenizerDataPath("sentencepiece_ids.json");
  if (!pathExists(fixture))
    GTEST_SKIP() << fixture << " absent: run scripts/golden/make_tokenizer_model_ids.py where Python's "
                 << "sentencepiece is installed";
  const json root = readJsonFile(fixture);
  if (!root["models"].contains(m.rel)) GTEST_SKIP() << fixture << " has no entry for " << m.rel;
  const json& entry = root["models"][m.rel];
  const std::vector<std::string> texts = root["texts"].get<std::vector<std::string>>();
  ASSERT_EQ(entry["cases"].size(), texts.size());
  EXPECT_EQ(tok_->bosId(), std::optional<TokenId>(entry["bos_id"].get<TokenId>()));
  EXPECT_EQ(tok_->vocabSize(), entry["piece_size"].get<size_t>());
  for (size_t i = 0; i < texts.size(); ++i) {
    const json& c = entry["cases"][i];
    const std::vector<TokenId> want = toIds(c["ids"]);
    EXPECT_EQ(encodeOk(*tok_, texts[i], false), want)
        << m.name << " text " << i << " " << escapeForMessage(texts[i]);
    EXPECT_EQ(tok_->decode(want), c["decoded"].get<std::string>()) << m.name << " text " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SpReal, ::testing::ValuesIn(spModels()),
                         [](const auto& info) { return info.param.name; });

// The tokenizer.json HF's LlamaConverter makes from a model encodes and decodes
// as the model itself (the corpus of tests/data/tokenizer with its HF ids).
// `with_specials`: also texts that hold <s> / </s> / <unk>, and decode with
// skip_special_tokens. The shared Llama-2 tokenizer.json marks those three
// "normalized": true, which makes HF 0.23 match them in the normalized text
// ("▁<s>") and decode them unskipped: a quirk of that converted file (Meta's
// own and Mistral's mark them false), so Llama-2 is compared without them.
void expectCorpusParity(const std::string& model_rel, const std::string& fixture_name, bool with_specials) {
  SKIP_WITHOUT_SENTENCEPIECE();
  if (!pathExists(sharedPath(model_rel)))
    GTEST_SKIP() << "shared test data absent: " << sharedPath(model_rel);
  const Tokenizer* sp = cachedTokenizer(sharedPath(model_rel));
  ASSERT_NE(sp, nullptr);
  const json fixture = readJsonFile(tokenizerDataPath(fixture_name));
  size_t n = 0;
  for (const json& c : fixture["cases"]) {
    const std::string text = c["text"].get<std::string>();
    if (!with_specials && (text.find("<s>") != std::string::npos || text.find("</s>") != std::string::npos ||
                           text.find("<unk>") != std::string::npos))
      continue;
    EXPECT_EQ(encodeOk(*sp, text, false), toIds(c["ids"])) << c["id"] << " " << escapeForMessage(text);
    EXPECT_EQ(encodeOk(*sp, text, true), toIds(c["ids_special"])) << c["id"];
    EXPECT_EQ(sp->decode(toIds(c["ids_special"])), c["decode"].get<std::string>()) << c["id"];
    if (with_specials)
      EXPECT_EQ(sp->decode(toIds(c["ids_special"]), true), c["decode_skip"].get<std::string>()) << c["id"];
    ++n;
  }
  EXPECT_GT(n, 50u);
}

TEST(SpParity, Llama2ModelEqualsItsTokenizerJson) {
  expectCorpusParity("tokenizers/llama2/tokenizer.model", "expected_llama2.json", false);
}

TEST(SpParity, MistralModelEqualsItsTokenizerJson) {
  expectCorpusParity("tokenizers/mistral/tokenizer.model.v1", "expected_mistral.json", true);
}

// Decoding any ids (byte runs, control tokens, unknown ids) as the tokenizer.json does.
TEST(SpParity, DecodeOfRandomIdsEqualsTokenizerJson) {
  SKIP_WITHOUT_SENTENCEPIECE();
  const std::string model = sharedPath("tokenizers/mistral/tokenizer.model.v1");
  const std::string json_path = sharedPath("tokenizers/mistral/tokenizer.json");
  if (!pathExists(model) || !pathExists(json_path)) GTEST_SKIP() << "shared test data absent: " << model;
  const Tokenizer* sp = cachedTokenizer(model);
  const Tokenizer* hf = cachedTokenizer(json_path);
  ASSERT_NE(sp, nullptr);
  ASSERT_NE(hf, nullptr);
  ASSERT_EQ(sp->vocabSize(), hf->vocabSize());
  for (TokenId id = 0; id < static_cast<TokenId>(sp->vocabSize()); ++id) {
    ASSERT_EQ(sp->idToToken(id), hf->idToToken(id)) << id;
    ASSERT_EQ(sp->isSpecial(id), hf->isSpecial(id)) << id;
  }
  EXPECT_EQ(sp->tokenToId("\xE2\x96\x81Hello"), hf->tokenToId("\xE2\x96\x81Hello"));
  EXPECT_TRUE(sp->tokenToId("\xE2\x96\x81Hello").has_value());
  EXPECT_EQ(sp->tokenToId("no such piece"), std::nullopt);
  std::mt19937 rng(99);
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<TokenId> ids(1 + rng() % 12);
    for (TokenId& id : ids) {
      const uint32_t r = rng() % 10;
      // Mostly byte tokens (3..258) and specials (0..2) to exercise runs; some of anything, and unknown ids.
      id = r < 4   ? static_cast<TokenId>(3 + rng() % 256)
           : r < 5 ? static_cast<TokenId>(rng() % 3)
           : r < 9 ? static_cast<TokenId>(rng() % 32000)
                   : static_cast<TokenId>(32000 + rng() % 10);
    }
    for (bool skip : {false, true})
      ASSERT_EQ(sp->decode(ids, skip), hf->decode(ids, skip)) << idsToString(ids) << " skip " << skip;
  }
}

TEST(SpStream, StreamingEqualsDecode) {
  const Tokenizer* sp = cachedSp("tokenizers/llama2/tokenizer.model");
  if (sp == nullptr) GTEST_SKIP() << "SentencePiece or shared test data absent";
  const std::string text = "Once upon a time \xF0\x9F\xA6\x99 caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC <s> end\n";
  const std::vector<TokenId> ids = encodeOk(*sp, text, true);
  StreamDecoder sd(*sp, true);
  std::string out;
  for (TokenId id : ids) out += sd.step(id);
  out += sd.flush();
  EXPECT_EQ(out, sp->decode(ids, true));
}

// Concurrent encode / decode from several threads give the single-threaded results.
TEST(SpStream, ThreadSafe) {
  const Tokenizer* sp = cachedSp("tokenizers/mistral/tokenizer.model.v1");
  if (sp == nullptr) GTEST_SKIP() << "SentencePiece or shared test data absent";
  const json corpus = readJsonFile(tokenizerDataPath("corpus.json"));
  std::vector<std::string> texts;
  std::vector<std::vector<TokenId>> want;
  for (const json& c : corpus) {
    texts.push_back(c["text"].get<std::string>());
    want.push_back(encodeOk(*sp, texts.back()));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = (t + round) % 3; i < texts.size(); i += 3) {
          auto ids = sp->encode(texts[i], true);
          if (!ids.isOk() || *ids != want[i] || sp->decode(*ids, true) != sp->decode(want[i], true)) ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// ---- errors ----

void expectLoadError(std::string_view bytes, const std::string& source, const std::string& needle = "") {
  auto t = tok::loadSentencePiece(bytes, source, nullptr);
  ASSERT_FALSE(t.isOk()) << source << ": " << bytes.size() << " bytes accepted";
  const std::string& m = t.status().message();
  EXPECT_EQ(t.status().code(), StatusCode::kParseError) << m;
  EXPECT_EQ(m.rfind(source + ": ", 0), 0u) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_LT(m.size(), 1024u) << m;
  if (!needle.empty()) EXPECT_NE(m.find(needle), std::string::npos) << m;
}

TEST(SpErrors, TruncatedAndCorruptModels) {
  SKIP_WITHOUT_SENTENCEPIECE();
  const std::string path = sharedPath("tokenizers/llama2/tokenizer.model");
  if (!pathExists(path)) GTEST_SKIP() << "shared test data absent: " << path;
  const std::string full = readFile(path);
  ASSERT_TRUE(tok::loadSentencePiece(full, "tokenizer.model", nullptr).isOk());
  expectLoadError("", "tokenizer.model", "empty file");
  // The pieces take the first 90% of the file; the specs follow them, so any
  // cut before the end of the specs is an error.
  for (size_t k = 1; k < 64; ++k) expectLoadError(std::string_view(full).substr(0, k), "tokenizer.model");
  for (size_t i = 1; i < 58; ++i)
    expectLoadError(std::string_view(full).substr(0, full.size() * i / 64), "tokenizer.model",
                    "truncated or corrupt");
  expectLoadError(std::string_view(full).substr(0, full.size() / 2), "tokenizer.model", "remain");
  expectLoadError("{\"version\": \"1.0\", \"model\": {}}", "tokenizer.model",
                  "not a valid SentencePiece model");
  expectLoadError(std::string(1000, '\xFF'), "tokenizer.model");
  std::mt19937 rng(5);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  expectLoadError(noise, "tokenizer.model");
  // Bytes flipped inside a structurally valid file: the library either loads a
  // different model or reports an error; never a crash.
  for (int iter = 0; iter < 200; ++iter) {
    std::string bad = full;
    const size_t at = rng() % 2000;
    bad[at] = static_cast<char>(bad[at] ^ (1 << (rng() % 8)));
    auto t = tok::loadSentencePiece(bad, "flipped.model", nullptr);
    if (!t.isOk()) {
      EXPECT_EQ(t.status().message().find('\n'), std::string::npos) << t.status().message();
    } else {
      (void)(*t)->encode("Hello world", true);
    }
  }
}

TEST(SpErrors, FromFileNamesTheFile) {
  SKIP_WITHOUT_SENTENCEPIECE();
  TempDir tmp;
  const std::string p = tmp.write("tokenizer.model", "");
  auto t = Tokenizer::fromFile(p);
  ASSERT_FALSE(t.isOk());
  EXPECT_EQ(t.status().message().rfind(p + ": ", 0), 0u) << t.status().message();
  auto missing = Tokenizer::fromFile(tmp.file("absent.model"));
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.status().message().find("absent.model"), std::string::npos);
}

// ---- model directories: tokenizer_config.json and precedence ----

class SpDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_SENTENCEPIECE();
    const std::string path = sharedPath("tokenizers/llama2/tokenizer.model");
    if (!pathExists(path)) GTEST_SKIP() << "shared test data absent: " << path;
    tmp_.write("tokenizer.model", readFile(path));
  }
  std::unique_ptr<Tokenizer> load(const std::string& config_json) {
    if (!config_json.empty()) tmp_.write("tokenizer_config.json", config_json);
    auto t = Tokenizer::fromDirectory(tmp_.path());
    EXPECT_TRUE(t.isOk()) << t.status().toString();
    if (!t.isOk()) return nullptr;
    EXPECT_NE(*t, nullptr);
    return std::move(t).value();
  }
  TempDir tmp_;
};

TEST_F(SpDirectory, NoConfigAddsBosAndMatchesControlTokens) {
  auto t = load("");
  ASSERT_NE(t, nullptr);
  using V = std::vector<TokenId>;
  EXPECT_EQ(encodeOk(*t, "Hello world"), (V{1, 15043, 3186}));
  EXPECT_EQ(encodeOk(*t, "Hello</s>", false), (V{15043, 2}));  // </s> in the text is the token
  EXPECT_EQ(t->decode({1, 15043, 3186, 2}), "<s> Hello world</s>");
  EXPECT_EQ(t->decode({1, 15043, 3186, 2}, true), "Hello world");
  EXPECT_TRUE(t->isSpecial(0));
  EXPECT_FALSE(t->isSpecial(15043));
}

TEST_F(SpDirectory, ConfigSwitchesBosAndEos) {
  auto t = load(
      R"({"add_bos_token": false, "add_eos_token": true, "bos_token": "<s>", "eos_token": {"__type": "AddedToken", "content": "</s>"}})");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(encodeOk(*t, "Hello"), (std::vector<TokenId>{15043, 2}));
  EXPECT_TRUE(t->specialPrefixIds().empty());
  EXPECT_EQ(t->specialSuffixIds(), std::vector<TokenId>{2});
}

// added_tokens_decoder: new ids past the pieces, and ids that rename a piece
// (InternLM2's chat tokens over placeholder pieces).
TEST_F(SpDirectory, AddedTokensDecoder) {
  auto t = load(R"({"added_tokens_decoder": {
      "32000": {"content": "<pad>", "special": true},
      "31999": {"content": "<|im_end|>", "special": true, "lstrip": false},
      "31998": {"content": "<tool>", "special": false}}})");
  ASSERT_NE(t, nullptr);
  using V = std::vector<TokenId>;
  EXPECT_EQ(t->vocabSize(), 32001u);
  EXPECT_EQ(encodeOk(*t, "Hello<|im_end|><pad>", false), (V{15043, 31999, 32000}));
  EXPECT_EQ(encodeOk(*t, "<tool>Hello", false), (V{31998, 15043}));  // legacy: a dummy prefix after it too
  EXPECT_EQ(t->idToToken(31999), std::optional<std::string>("<|im_end|>"));
  EXPECT_EQ(t->tokenToId("<pad>"), std::optional<TokenId>(32000));
  EXPECT_EQ(t->decode({15043, 31999, 32000, 31998}), "Hello<|im_end|><pad><tool>");
  EXPECT_EQ(t->decode({15043, 31999, 32000, 31998}, true), "Hello<tool>");
  EXPECT_TRUE(t->isSpecial(32000));
  EXPECT_FALSE(t->isSpecial(31998));
}

// "legacy": false: no dummy prefix after an added token (LlamaTokenizer(legacy=False)).
TEST_F(SpDirectory, NonLegacyHasNoPrefixAfterSpecialTokens) {
  auto legacy = load(R"({"legacy": true})");
  ASSERT_NE(legacy, nullptr);
  EXPECT_EQ(encodeOk(*legacy, "<s>Hello", false), (std::vector<TokenId>{1, 15043}));
  auto modern = load(R"({"legacy": false})");
  ASSERT_NE(modern, nullptr);
  const std::optional<TokenId> bare = modern->tokenToId("Hello");
  ASSERT_TRUE(bare.has_value());
  EXPECT_NE(*bare, 15043);
  EXPECT_EQ(encodeOk(*modern, "<s>Hello", false), (std::vector<TokenId>{1, *bare}));
  EXPECT_EQ(encodeOk(*modern, "Hello<s> Hello", false), (std::vector<TokenId>{15043, 1, 15043}));
  EXPECT_EQ(encodeOk(*modern, "Hello world", true), (std::vector<TokenId>{1, 15043, 3186}));
  EXPECT_EQ(modern->decode({1, *bare}), "<s>Hello");
}

TEST_F(SpDirectory, ChatGlmSpecialsFollowThePieces) {
  auto t = load(R"({"tokenizer_class": "ChatGLMTokenizer"})");
  ASSERT_NE(t, nullptr);
  using V = std::vector<TokenId>;
  EXPECT_EQ(t->vocabSize(), 32009u);
  EXPECT_EQ(t->specialPrefixIds(), (V{32001, 32003}));  // [gMASK] sop, no BOS
  EXPECT_EQ(t->tokenToId("<|observation|>"), std::optional<TokenId>(32008));
  EXPECT_EQ(encodeOk(*t, "<|user|>Hello"), (V{32001, 32003, 32006, 15043}));
}

// Llama's decode is the tokenizer.json's ("<s> Hello"); InternLM2 / Baichuan / ChatGLM decode each
// run of pieces with sp.decode, which drops the dummy-prefix space after a special token.
TEST_F(SpDirectory, SlowTokenizerFamiliesDecodeRunsAfterSpecials) {
  auto llama = load("");
  ASSERT_NE(llama, nullptr);
  EXPECT_EQ(llama->decode({15043, 1, 3186, 2, 29871, 13}), "Hello<s> world</s> \n");
  auto internlm = load(R"({"tokenizer_class": "InternLM2Tokenizer"})");
  ASSERT_NE(internlm, nullptr);
  EXPECT_EQ(internlm->decode({15043, 1, 3186, 2, 29871, 13}), "Hello<s>world</s>\n");
  EXPECT_EQ(internlm->decode({15043, 1, 3186, 2, 29871, 13}, true), "Hello world \n");
  EXPECT_EQ(encodeOk(*internlm, "Hello"), (std::vector<TokenId>{1, 15043}));
}

TEST_F(SpDirectory, MalformedConfigIsAnError) {
  tmp_.write("tokenizer_config.json", R"({"add_bos_token": "yes"})");
  auto t = Tokenizer::fromDirectory(tmp_.path());
  ASSERT_FALSE(t.isOk());
  const std::string& m = t.status().message();
  EXPECT_NE(m.find("tokenizer_config.json"), std::string::npos) << m;
  EXPECT_NE(m.find("add_bos_token"), std::string::npos) << m;
  tmp_.write("tokenizer_config.json", R"({"added_tokens_decoder": {"x": {"content": "a"}}})");
  auto t2 = Tokenizer::fromDirectory(tmp_.path());
  ASSERT_FALSE(t2.isOk());
  EXPECT_NE(t2.status().message().find("added_tokens_decoder.x"), std::string::npos) << t2.status().message();
}

// tokenizer.json first, then tokenizer.model, then *.tiktoken (qwen.tiktoken first).
TEST(TokenizerDirectory, Precedence) {
  TempDir tmp;
  EXPECT_EQ(Tokenizer::findInDirectory(tmp.path()), std::nullopt);
  auto none = Tokenizer::fromDirectory(tmp.path());
  ASSERT_TRUE(none.isOk());
  EXPECT_EQ(*none, nullptr);
  EXPECT_EQ(Tokenizer::findInDirectory(tmp.file("no-such-dir")), std::nullopt);
  tmp.write("a.tiktoken", "");
  EXPECT_EQ(Tokenizer::findInDirectory(tmp.path()), tmp.file("a.tiktoken"));
  tmp.write("qwen.tiktoken", "");
  EXPECT_EQ(Tokenizer::findInDirectory(tmp.path()), tmp.file("qwen.tiktoken"));
  auto bad = Tokenizer::fromDirectory(tmp.path());
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("qwen.tiktoken: no tokens"), std::string::npos)
      << bad.status().message();
  tmp.write("tokenizer.model", "");
  EXPECT_EQ(Tokenizer::findInDirectory(tmp.path()), tmp.file("tokenizer.model"));
  tmp.write("tokenizer.json", "{}");
  EXPECT_EQ(Tokenizer::findInDirectory(tmp.path()), tmp.file("tokenizer.json"));
}

}  // namespace
}  // namespace llmrt::testing
