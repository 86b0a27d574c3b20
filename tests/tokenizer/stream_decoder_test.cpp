// StreamDecoder: the pieces it returns concatenate to the full decode, and
// none of them splits a UTF-8 character.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/test_util.h"

namespace llmrt::testing {
namespace {

using nlohmann::json;

std::vector<std::string> sharedStrings() {
  std::vector<std::string> texts;
  std::string path = sharedPath("tokenizers/tests/strings.json");
  if (pathExists(path))
    for (const json& s : readJsonFile(path)) texts.push_back(s["text"].get<std::string>());
  std::string corpus = tokenizerDataPath("corpus.json");
  if (pathExists(corpus))
    for (const json& c : readJsonFile(corpus)) texts.push_back(c["text"].get<std::string>());
  return texts;
}

// Streams `ids` one by one; checks every piece is valid UTF-8 and returns the concatenation.
std::string streamAll(const Tokenizer& tok, const std::vector<TokenId>& ids, bool skip,
                      const std::vector<TokenId>& prompt = {}) {
  StreamDecoder sd(tok, skip, prompt);
  std::string all;
  for (TokenId id : ids) {
    std::string piece = sd.step(id);
    EXPECT_TRUE(validUtf8(piece)) << "piece " << escapeForMessage(piece);
    all += piece;
  }
  std::string rest = sd.flush();
  EXPECT_TRUE(validUtf8(rest));
  return all + rest;
}

class StreamParity : public ::testing::TestWithParam<NamedTokenizer> {};

TEST_P(StreamParity, ConcatenationEqualsFullDecode) {
  const NamedTokenizer& nt = GetParam();
  const Tokenizer* tok = cachedTokenizer(sharedPath(nt.rel_path));
  if (tok == nullptr) GTEST_SKIP() << "tokenizer absent: " << nt.rel_path;
  std::vector<std::string> texts = sharedStrings();
  if (texts.empty()) GTEST_SKIP() << "no test strings (shared data and corpus absent)";
  size_t cases = 0;
  for (const std::string& text : texts) {
    std::vector<TokenId> ids = tok->encode(text, true);
    for (bool skip : {false, true}) {
      std::string full = tok->decode(ids, skip);
      EXPECT_EQ(streamAll(*tok, ids, skip), full)
          << nt.name << " skip=" << skip << " " << escapeForMessage(text);
      ++cases;
      // With the first half as the prompt, the pieces are what the rest adds.
      if (ids.size() >= 2) {
        size_t half = ids.size() / 2;
        std::vector<TokenId> prompt(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(half));
        std::vector<TokenId> gen(ids.begin() + static_cast<std::ptrdiff_t>(half), ids.end());
        std::string prefix = tok->decode(prompt, skip);
        std::string tail = streamAll(*tok, gen, skip, prompt);
        if (full.compare(0, prefix.size(), prefix) == 0) {
          EXPECT_EQ(prefix + tail, full) << nt.name << " with prompt, " << escapeForMessage(text);
        }
      }
    }
  }
  std::printf("[stream] %s: %zu streams checked\n", nt.name.c_str(), cases);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, StreamParity, ::testing::ValuesIn(sharedTokenizers()),
                         [](const ::testing::TestParamInfo<NamedTokenizer>& info) {
                           std::string s = info.param.name;
                           for (char& c : s)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

}  // namespace
}  // namespace llmrt::testing
