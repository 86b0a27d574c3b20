// Parity with HF `tokenizers` on real tokenizer files: the expected ids of
// ../shared/testdata/tokenizers/tests, llama.cpp's vocab test pairs, and our
// own corpus fixtures (tests/data/tokenizer/expected_<name>.json, produced by
// scripts/golden/tokenizer_fixtures.py). Tests skip when the data is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/test_util.h"
#include "tokenizer/unicode.h"

namespace llmrt::testing {
namespace {

using nlohmann::json;

std::vector<TokenId> toIds(const json& j) {
  std::vector<TokenId> ids;
  for (const json& x : j) ids.push_back(x.get<TokenId>());
  return ids;
}

class SharedParity : public ::testing::TestWithParam<NamedTokenizer> {};

// Every string of tokenizers/tests/strings.json encodes (without special
// tokens) to the recorded ids, and decoding those ids gives the text back.
TEST_P(SharedParity, ExpectedIds) {
  const NamedTokenizer& nt = GetParam();
  std::string expected_path = sharedPath("tokenizers/tests/expected_ids.json");
  std::string strings_path = sharedPath("tokenizers/tests/strings.json");
  if (!pathExists(expected_path) || !pathExists(strings_path))
    GTEST_SKIP() << "shared test data absent: " << expected_path;
  json expected = readJsonFile(expected_path);
  json strings = readJsonFile(strings_path);
  if (!expected["tokenizers"].contains(nt.rel_path))
    GTEST_SKIP() << "no expected ids recorded for " << nt.rel_path;
  const Tokenizer* tok = cachedTokenizer(sharedPath(nt.rel_path));
  if (tok == nullptr) GTEST_SKIP() << "tokenizer absent: " << sharedPath(nt.rel_path);
  const json& ids = expected["tokenizers"][nt.rel_path]["ids"];
  ASSERT_EQ(ids.size(), strings.size());
  size_t enc_ok = 0, dec_ok = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    std::string text = strings[i]["text"].get<std::string>();
    std::vector<TokenId> want = toIds(ids[i]);
    std::vector<TokenId> got = encodeOk(*tok, text, false);
    EXPECT_EQ(got, want) << nt.name << " string " << i << " " << escapeForMessage(text);
    enc_ok += got == want;
    // HF's decoders invert the pipeline exactly for these files (Qwen's after NFC).
    std::string want_text =
        nt.name == "qwen2-family" ? tok::normalizeUnicode(text, tok::NormForm::kNFC) : text;
    std::string decoded = tok->decode(want, false);
    EXPECT_EQ(decoded, want_text) << nt.name << " decode of string " << i;
    dec_ok += decoded == want_text;
  }
  std::printf("[parity] %s expected_ids.json: encode %zu/%zu, decode %zu/%zu\n", nt.name.c_str(), enc_ok,
              strings.size(), dec_ok, strings.size());
}

// Our own corpus, checked against fixtures written by HF tokenizers.
TEST_P(SharedParity, CorpusFixture) {
  const NamedTokenizer& nt = GetParam();
  std::string fixture = tokenizerDataPath("expected_" + nt.name + ".json");
  if (!pathExists(fixture)) GTEST_SKIP() << "fixture absent: " << fixture;
  const Tokenizer* tok = cachedTokenizer(sharedPath(nt.rel_path));
  if (tok == nullptr) GTEST_SKIP() << "tokenizer absent: " << sharedPath(nt.rel_path);
  json fx = readJsonFile(fixture);
  size_t n = 0, enc_ok = 0, enc_sp_ok = 0, dec_ok = 0, dec_skip_ok = 0;
  for (const json& c : fx["cases"]) {
    std::string text = c["text"].get<std::string>();
    std::string id = c.value("id", std::to_string(n));
    ++n;
    std::vector<TokenId> want = toIds(c["ids"]);
    std::vector<TokenId> want_sp = toIds(c["ids_special"]);
    std::vector<TokenId> got = encodeOk(*tok, text, false);
    std::vector<TokenId> got_sp = encodeOk(*tok, text, true);
    EXPECT_EQ(got, want) << nt.name << " case " << id << " " << escapeForMessage(text);
    EXPECT_EQ(got_sp, want_sp) << nt.name << " case " << id << " (add_special_tokens)";
    enc_ok += got == want;
    enc_sp_ok += got_sp == want_sp;
    std::string dec = tok->decode(want_sp, false);
    std::string dec_skip = tok->decode(want_sp, true);
    EXPECT_EQ(dec, c["decode"].get<std::string>()) << nt.name << " case " << id << " decode";
    EXPECT_EQ(dec_skip, c["decode_skip"].get<std::string>()) << nt.name << " case " << id << " decode skip";
    dec_ok += dec == c["decode"].get<std::string>();
    dec_skip_ok += dec_skip == c["decode_skip"].get<std::string>();
  }
  EXPECT_GT(n, 0u);
  std::printf(
      "[parity] %s corpus fixture (%s): encode %zu/%zu, encode+special %zu/%zu, decode %zu/%zu, "
      "decode skip_special %zu/%zu\n",
      nt.name.c_str(), fx.value("generator", "?").c_str(), enc_ok, n, enc_sp_ok, n, dec_ok, n, dec_skip_ok,
      n);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, SharedParity, ::testing::ValuesIn(sharedTokenizers()),
                         [](const ::testing::TestParamInfo<NamedTokenizer>& info) {
                           std::string s = info.param.name;
                           for (char& c : s)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

// Names of the synthetic tokenizers (tests/data/tokenizer/synthetic/<name>/tokenizer.json,
// written by scripts/golden/make_synthetic_tokenizers.py).
std::vector<std::string> syntheticNames() {
  std::vector<std::string> names;
  std::filesystem::path dir = tokenizerDataPath("synthetic");
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_directory() && std::filesystem::exists(e.path() / "tokenizer.json"))
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Synthetic tokenizers cover Metaspace variants, added-token flags, the other
// normalizers / pre-tokenizers / post-processors / decoders, unk handling,
// truncation and padding; fixtures come from HF tokenizers.
TEST(SyntheticParity, CorpusFixtures) {
  std::vector<std::string> names = syntheticNames();
  ASSERT_FALSE(names.empty()) << "no synthetic tokenizers under " << tokenizerDataPath("synthetic");
  size_t checked = 0;
  for (const std::string& name : names) {
    std::string fixture = tokenizerDataPath("synthetic/expected_" + name + ".json");
    if (!pathExists(fixture)) {
      ADD_FAILURE() << "fixture missing for synthetic tokenizer " << name;
      continue;
    }
    auto tok = Tokenizer::fromFile(tokenizerDataPath("synthetic/" + name + "/tokenizer.json"));
    ASSERT_TRUE(tok.isOk()) << name << ": " << tok.status().toString();
    json fx = readJsonFile(fixture);
    size_t n = 0, ok = 0;
    for (const json& c : fx["cases"]) {
      std::string text = c["text"].get<std::string>();
      std::vector<TokenId> want = toIds(c["ids"]), want_sp = toIds(c["ids_special"]);
      std::vector<TokenId> got = encodeOk(**tok, text, false), got_sp = encodeOk(**tok, text, true);
      std::string dec = (*tok)->decode(want_sp, false), dec_skip = (*tok)->decode(want_sp, true);
      EXPECT_EQ(got, want) << name << " case " << c["id"] << " " << escapeForMessage(text);
      EXPECT_EQ(got_sp, want_sp) << name << " case " << c["id"] << " (add_special_tokens)";
      EXPECT_EQ(dec, c["decode"].get<std::string>()) << name << " case " << c["id"] << " decode";
      EXPECT_EQ(dec_skip, c["decode_skip"].get<std::string>())
          << name << " case " << c["id"] << " decode skip";
      ++n;
      ok += got == want && got_sp == want_sp && dec == c["decode"].get<std::string>() &&
            dec_skip == c["decode_skip"].get<std::string>();
      // Streaming gives the full decode here too.
      for (bool skip : {false, true}) {
        StreamDecoder sd(**tok, skip);
        std::string all;
        for (TokenId id : want_sp) all += sd.step(id);
        all += sd.flush();
        EXPECT_EQ(all, skip ? dec_skip : dec) << name << " stream, case " << c["id"];
      }
    }
    std::printf("[parity] synthetic %s: %zu/%zu cases (encode x2, decode x2, stream x2)\n", name.c_str(), ok,
                n);
    checked += n;
  }
  EXPECT_GT(checked, 0u);
}

struct VocabPair {
  std::string vocab;      // llama.cpp-vocab/ggml-vocab-<vocab>.gguf.{inp,out}
  std::string tokenizer;  // the HF file with the same vocabulary
};

class LlamaCppVocab : public ::testing::TestWithParam<VocabPair> {};

// llama.cpp's tokenizer tests: the .out lines are the ids without BOS.
TEST_P(LlamaCppVocab, Pairs) {
  const VocabPair& p = GetParam();
  std::string inp = sharedPath("llama.cpp-vocab/ggml-vocab-" + p.vocab + ".gguf.inp");
  std::string out = sharedPath("llama.cpp-vocab/ggml-vocab-" + p.vocab + ".gguf.out");
  if (!pathExists(inp) || !pathExists(out)) GTEST_SKIP() << "llama.cpp vocab test data absent: " << inp;
  const Tokenizer* tok = cachedTokenizer(sharedPath(p.tokenizer));
  if (tok == nullptr) GTEST_SKIP() << "tokenizer absent: " << p.tokenizer;

  const std::string sep = "\n__ggml_vocab_test__\n";
  std::string all = readFile(inp);
  std::vector<std::string> texts;
  size_t pos = 0;
  while (true) {
    size_t hit = all.find(sep, pos);
    if (hit == std::string::npos) break;
    texts.push_back(all.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  std::string outs = readFile(out);
  std::vector<std::vector<TokenId>> expected;
  size_t lp = 0;
  while (lp < outs.size()) {
    size_t nl = outs.find('\n', lp);
    if (nl == std::string::npos) nl = outs.size();
    std::vector<TokenId> ids;
    std::string line = outs.substr(lp, nl - lp);
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && line[i] == ' ') ++i;
      size_t j = i;
      while (j < line.size() && line[j] != ' ') ++j;
      if (j > i) ids.push_back(std::stoi(line.substr(i, j - i)));
      i = j;
    }
    expected.push_back(ids);
    lp = nl + 1;
  }
  ASSERT_EQ(texts.size(), expected.size()) << "inp/out case counts differ";
  size_t ok = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<TokenId> got = encodeOk(*tok, texts[i], false);
    EXPECT_EQ(got, expected[i]) << p.vocab << " case " << i << " " << escapeForMessage(texts[i]);
    ok += got == expected[i];
  }
  std::printf("[parity] llama.cpp %s (%s): %zu/%zu\n", p.vocab.c_str(), p.tokenizer.c_str(), ok,
              texts.size());
}

INSTANTIATE_TEST_SUITE_P(Vocabs, LlamaCppVocab,
                         ::testing::Values(VocabPair{"llama-spm", "tokenizers/llama2/tokenizer.json"},
                                           VocabPair{"llama-bpe", "tokenizers/llama3/tokenizer.json"},
                                           VocabPair{"qwen2", "tokenizers/qwen2-family/tokenizer.json"},
                                           VocabPair{"gpt-2", "tokenizers/gpt2/tokenizer.json"},
                                           VocabPair{"falcon", "tokenizers/falcon/tokenizer.json"},
                                           VocabPair{"phi-3", "tokenizers/phi-3/tokenizer.json"}),
                         [](const ::testing::TestParamInfo<VocabPair>& info) {
                           std::string s = info.param.vocab;
                           for (char& c : s)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

// Concurrent encodes give the same ids as a single thread (the word cache
// and regex match state are shared / per thread).
TEST(TokenizerThreads, ConcurrentEncodeMatchesSerial) {
  const Tokenizer* tok = cachedTokenizer(sharedPath("tokenizers/llama3/tokenizer.json"));
  std::string strings_path = sharedPath("tokenizers/tests/strings.json");
  if (tok == nullptr || !pathExists(strings_path)) GTEST_SKIP() << "shared Llama-3 tokenizer absent";
  json strings = readJsonFile(strings_path);
  std::vector<std::string> texts;
  for (const json& s : strings) texts.push_back(s["text"].get<std::string>());
  std::vector<std::vector<TokenId>> serial;
  for (const auto& t : texts) serial.push_back(encodeOk(*tok, t, true));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      for (int rep = 0; rep < 20; ++rep)
        for (size_t i = 0; i < texts.size(); ++i) {
          size_t k = (i + static_cast<size_t>(th) * 7) % texts.size();
          if (encodeOk(*tok, texts[k], true) != serial[k]) ++mismatches;
        }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace llmrt::testing
