// StreamDecoder: the pieces it returns concatenate to the full decode, and
// none of them splits a UTF-8 character - on encoded texts, on the issue's
// byte-run case, and on random id sequences over every shared tokenizer.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/byte_level.h"
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
  if (tok == nullptr) GTEST_SKIP() << "tokenizer absent: " << sharedPath(nt.rel_path);
  std::vector<std::string> texts = sharedStrings();
  if (texts.empty()) GTEST_SKIP() << "no test strings (shared data and corpus absent)";
  size_t cases = 0;
  for (const std::string& text : texts) {
    std::vector<TokenId> ids = encodeOk(*tok, text, true);
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

// ---- byte runs that a later token changes ---------------------------------

namespace random_streams {

std::vector<std::string> streamPieces(const Tokenizer& tok, const std::vector<TokenId>& ids, bool skip,
                                      const std::vector<TokenId>& prompt = {}) {
  StreamDecoder sd(tok, skip, prompt);
  std::vector<std::string> pieces;
  for (TokenId id : ids) pieces.push_back(sd.step(id));
  pieces.push_back(sd.flush());
  return pieces;
}

std::string join(const std::vector<std::string>& pieces) {
  std::string all;
  for (const std::string& p : pieces) all += p;
  return all;
}

// The issue's case: stories260K streamed an "R" (<0x52>) that the invalid
// <0xFD> after it turns into U+FFFD in decode(): ByteFallback replaces every
// byte of an invalid run.
TEST(StreamDecoderRegression, Stories260KByteRunTurnedInvalidLater) {
  const std::string rel = "models/stories260K-hf/tokenizer.json";
  const Tokenizer* tok = cachedTokenizer(sharedPath(rel));
  if (tok == nullptr) GTEST_SKIP() << "shared test data absent: " << sharedPath(rel);
  const std::vector<TokenId> ids = {19, 444, 85, 256, 114, 108};  // <0x10> x <0x52> <0xFD> <0x6F> <0x69>
  const std::string fffd = "\xEF\xBF\xBD";
  for (bool skip : {false, true}) {
    const std::string full = tok->decode(ids, skip);
    EXPECT_EQ(full, "\x10x" + fffd + fffd + fffd + fffd);
    std::vector<std::string> pieces = streamPieces(*tok, ids, skip);
    EXPECT_EQ(join(pieces), full) << "skip=" << skip;
    for (const std::string& p : pieces) EXPECT_EQ(p.find('R'), std::string::npos) << escapeForMessage(p);
  }
}

// Ids whose tokens are single bytes: <0xXX> (byte fallback) or the byte-level
// alphabet's characters.
std::vector<TokenId> byteIds(const Tokenizer& tok) {
  std::vector<TokenId> out;
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    if (auto id = tok.tokenToId(buf)) out.push_back(*id);
    if (auto id = tok.tokenToId(tok::byteLevelAlphabet().byte_to_utf8[b])) out.push_back(*id);
  }
  return out;
}

// 100,000 ids that never complete a character (byte-level 0xFF, a byte-fallback
// run) are held back at a constant cost per id, not by decoding the whole
// growing window at every step.
TEST(StreamDecoderLimits, LongHeldStreamsCostLinearTime) {
  const Tokenizer& bl = *cachedTokenizer(tokenizerDataPath("synthetic/bl_prefix_space/tokenizer.json"));
  const Tokenizer& sp = *cachedTokenizer(tokenizerDataPath("synthetic/sp_metaspace_first/tokenizer.json"));
  const auto ff_level = bl.tokenToId(tok::byteLevelAlphabet().byte_to_utf8[0xFF]);
  const auto ff_fallback = sp.tokenToId("<0xFF>");
  ASSERT_TRUE(ff_level && ff_fallback);
  const size_t n = 100000;
  const std::string fffd = "\xEF\xBF\xBD";
  for (const auto& [tok, id] : {std::pair{&bl, *ff_level}, std::pair{&sp, *ff_fallback}}) {
    const auto start = std::chrono::steady_clock::now();
    StreamDecoder sd(*tok);
    std::string all;
    for (size_t i = 0; i < n; ++i) all += sd.step(id);
    all += sd.flush();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 10.0);
    std::string want;
    for (size_t i = 0; i < n; ++i) want += fffd;
    EXPECT_EQ(all, want);
  }
}

struct StreamCase {
  std::string name;
  std::string path;
};
inline void PrintTo(const StreamCase& c, std::ostream* os) { *os << c.name; }

std::vector<StreamCase> streamCases() {
  std::vector<StreamCase> cases;
  for (const NamedTokenizer& nt : sharedTokenizers()) cases.push_back({nt.name, sharedPath(nt.rel_path)});
  cases.push_back({"llmrt_tiny", std::string(LLMRT_SOURCE_DIR) + "/models/llmrt-tiny/tokenizer.json"});
  cases.push_back(
      {"synthetic_sp_metaspace_first", tokenizerDataPath("synthetic/sp_metaspace_first/tokenizer.json")});
  cases.push_back(
      {"synthetic_bl_prefix_space", tokenizerDataPath("synthetic/bl_prefix_space/tokenizer.json")});
  return cases;
}

class StreamRandom : public ::testing::TestWithParam<StreamCase> {};

// Random id sequences - byte tokens (valid and invalid UTF-8 runs), special
// and added tokens, ids outside the vocabulary, any vocabulary id - stream to
// exactly decode(ids), with and without skip_special_tokens; with a prompt,
// decode(prompt) + pieces == decode(prompt + ids) whenever decode(prompt) is a
// prefix of the latter.
TEST_P(StreamRandom, PiecesPlusFlushEqualDecode) {
  const StreamCase& sc = GetParam();
  const Tokenizer* tok = cachedTokenizer(sc.path);
  if (tok == nullptr) GTEST_SKIP() << "tokenizer absent: " << sc.path;
  const std::vector<TokenId> bytes = byteIds(*tok);
  std::vector<TokenId> added;
  for (const AddedTokenInfo& a : tok->addedTokens()) added.push_back(a.id);
  const auto vocab = static_cast<TokenId>(tok->vocabSize());
  // LLMRT_STREAM_RANDOM_ITERS / _SEED run longer or other sequences (the default is fixed).
  const char* iters_env = std::getenv("LLMRT_STREAM_RANDOM_ITERS");
  const char* seed_env = std::getenv("LLMRT_STREAM_RANDOM_SEED");
  const int iters = iters_env != nullptr ? std::atoi(iters_env) : 400;
  const uint32_t seed =
      seed_env != nullptr ? static_cast<uint32_t>(std::strtoul(seed_env, nullptr, 10)) : 0x5eed;
  std::mt19937 rng(seed + static_cast<uint32_t>(sc.name.size()));
  auto pick = [&](const std::vector<TokenId>& v) { return v[rng() % v.size()]; };
  size_t streams = 0, prompt_checks = 0, failures = 0;
  for (int iter = 0; iter < iters && failures < 5; ++iter) {
    std::vector<TokenId> ids(1 + rng() % 24);
    for (TokenId& id : ids) {
      const uint32_t r = rng() % 100;
      if (r < 45 && !bytes.empty())
        id = pick(bytes);
      else if (r < 55 && !added.empty())
        id = pick(added);
      else if (r < 58)
        id = vocab + static_cast<TokenId>(rng() % 5);  // unknown: decode skips it
      else
        id = static_cast<TokenId>(rng() % static_cast<uint32_t>(vocab));
    }
    for (bool skip : {false, true}) {
      const std::string full = tok->decode(ids, skip);
      std::vector<std::string> pieces = streamPieces(*tok, ids, skip);
      const std::string got = join(pieces);
      ++streams;
      if (got != full) {
        ++failures;
        ADD_FAILURE() << sc.name << " skip=" << skip << " ids " << idsToString(ids) << "\n  stream "
                      << escapeForMessage(got) << "\n  decode " << escapeForMessage(full);
      }
      for (const std::string& p : pieces) EXPECT_TRUE(validUtf8(p)) << escapeForMessage(p);
      // The same ids after a prompt.
      const size_t cut = rng() % ids.size();
      std::vector<TokenId> prompt(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(cut));
      std::vector<TokenId> gen(ids.begin() + static_cast<std::ptrdiff_t>(cut), ids.end());
      const std::string prefix = tok->decode(prompt, skip);
      if (full.compare(0, prefix.size(), prefix) == 0) {
        ++prompt_checks;
        const std::string tail = join(streamPieces(*tok, gen, skip, prompt));
        if (prefix + tail != full) {
          ++failures;
          ADD_FAILURE() << sc.name << " skip=" << skip << " prompt " << idsToString(prompt) << " ids "
                        << idsToString(gen) << "\n  stream " << escapeForMessage(prefix + tail)
                        << "\n  decode " << escapeForMessage(full);
        }
      }
    }
  }
  EXPECT_EQ(failures, 0u);
  std::printf("[stream-random] %s: %zu streams, %zu with a prompt, %zu byte ids\n", sc.name.c_str(), streams,
              prompt_checks, bytes.size());
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, StreamRandom, ::testing::ValuesIn(streamCases()),
                         [](const ::testing::TestParamInfo<StreamCase>& info) {
                           std::string s = info.param.name;
                           for (char& c : s)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

}  // namespace random_streams

}  // namespace
}  // namespace llmrt::testing
