// tiktoken BPE files (Qwen v1's qwen.tiktoken): the file parser and its
// errors, the byte-pair merge on a hand-checked vocabulary, the Qwen
// pre-tokenizer, NFC and special tokens; then real vocabularies built at run
// time from shared tokenizer.json files (rank = id): the Qwen2 vocabulary
// (the one of qwen.tiktoken) against HF's expected ids, GPT-2's with the GPT-2
// pattern against HF's, and the Python tiktoken reference
// (tests/data/tokenizer/tiktoken_ids.json, scripts/golden/make_tokenizer_model_ids.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/file_tokenizer_util.h"
#include "tokenizer/test_util.h"
#include "tokenizer/tiktoken_bpe.h"
#include "tokenizer/tiktoken_tokenizer.h"
#include "tokenizer/unicode.h"

namespace llmrt::testing {
namespace {

using nlohmann::json;
using tok::TiktokenRanks;
using tok::TiktokenTokenizer;

std::vector<TokenId> toIds(const json& j) {
  std::vector<TokenId> ids;
  for (const json& x : j) ids.push_back(x.get<TokenId>());
  return ids;
}

// The 256 single bytes with rank = byte value, one line each.
std::string byteLines(const std::string& eol = "\n", int skip_byte = -1) {
  std::string s;
  for (int b = 0; b < 256; ++b) {
    if (b == skip_byte) continue;
    const char c = static_cast<char>(b);
    s += tok::encodeBase64(std::string_view(&c, 1)) + " " + std::to_string(b) + eol;
  }
  return s;
}

// A hand-checked vocabulary: the bytes, then "ab" 256, "cd" 257, "abcd" 258,
// "bc" 259, "aa" 260, "  " 261, " b" 262 (base64 written out by hand).
std::string tinyFile(const std::string& eol = "\n") {
  return byteLines(eol) + "YWI= 256" + eol + "Y2Q= 257" + eol + "YWJjZA== 258" + eol + "YmM= 259" + eol +
         "YWE= 260" + eol + "ICA= 261" + eol + "IGI= 262" + eol;
}

std::unique_ptr<TiktokenTokenizer> tinyTokenizer() {
  auto t = TiktokenTokenizer::fromContents(tinyFile(), "tiny.tiktoken");
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? std::move(t).value() : nullptr;
}

TEST(TiktokenBase64, DecodesAndRejects) {
  std::string out;
  EXPECT_TRUE(tok::decodeBase64("YWJjZA==", out));
  EXPECT_EQ(out, "abcd");
  EXPECT_TRUE(tok::decodeBase64("YWJj", out));
  EXPECT_EQ(out, "abc");
  EXPECT_TRUE(tok::decodeBase64("Ly8+", out));
  EXPECT_EQ(out, "//>");
  for (const char* bad : {"", "Q", "QQ=", "Q===", "QQ=A", "QR==", "YW I", "YW-=", "====", "YWJjZA==YWI="})
    EXPECT_FALSE(tok::decodeBase64(bad, out)) << bad;
  std::mt19937 rng(7);
  for (int n = 0; n < 40; ++n) {
    std::string s;
    for (int i = 0; i < n; ++i) s.push_back(static_cast<char>(rng() & 0xFF));
    ASSERT_TRUE(tok::decodeBase64(tok::encodeBase64(s), out) || s.empty());
    if (!s.empty()) EXPECT_EQ(out, s);
  }
}

TEST(TiktokenRanks, ParsesTinyFile) {
  auto r = TiktokenRanks::parse(tinyFile(), "tiny.tiktoken");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->size(), 263u);
  EXPECT_EQ(r->rankLimit(), 263u);
  EXPECT_EQ(r->rank("abcd"), 258);
  EXPECT_EQ(r->rank(" b"), 262);
  EXPECT_EQ(r->rank("abc"), -1);
  ASSERT_TRUE(r->hasRank(259));
  EXPECT_EQ(r->bytes(259), "bc");
  EXPECT_FALSE(r->hasRank(263));
  // \r\n and \r line ends and blank lines are accepted (Python's bytes.splitlines()).
  for (const std::string eol : {"\r\n", "\r", "\n\n"}) {
    auto r2 = TiktokenRanks::parse(tinyFile(eol), "tiny.tiktoken");
    ASSERT_TRUE(r2.isOk()) << r2.status().toString();
    EXPECT_EQ(r2->rank("abcd"), 258);
  }
  // Tabs between the fields, spaces around them.
  auto r3 = TiktokenRanks::parse(byteLines() + "  YWI=\t256  \n", "t.tiktoken");
  ASSERT_TRUE(r3.isOk()) << r3.status().toString();
  EXPECT_EQ(r3->rank("ab"), 256);
}

void expectError(const std::string& contents, const std::string& needle) {
  auto r = TiktokenRanks::parse(contents, "dir/t.tiktoken");
  ASSERT_FALSE(r.isOk()) << "accepted; expected an error containing '" << needle << "'";
  const std::string& m = r.status().message();
  EXPECT_EQ(r.status().code(), StatusCode::kParseError) << m;
  EXPECT_EQ(m.rfind("dir/t.tiktoken: ", 0), 0u) << m;
  EXPECT_NE(m.find(needle), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_LT(m.size(), 400u) << m;
}

TEST(TiktokenRanks, MalformedFilesAreOneLineErrors) {
  const std::string bytes = byteLines();
  expectError("", "no tokens");
  expectError("\n\n", "no tokens");
  expectError(bytes + "QQ==\n", "line 257: expected '<base64 token> <rank>', got 'QQ=='");
  expectError(bytes + "YWI= 256 7\n", "line 257: expected '<base64 token> <rank>'");
  expectError(bytes + "   \n", "line 257: expected '<base64 token> <rank>'");
  expectError(bytes + "YWI= x\n", "line 257: rank 'x' is not a decimal number");
  expectError(bytes + "YWI= -1\n", "rank '-1' is not a decimal number");
  expectError(bytes + "YWI= +5\n", "rank '+5' is not a decimal number");
  expectError(bytes + "YWI= 99999999999\n", "rank '99999999999'");
  expectError(bytes + "YWI= 2147483648\n", "rank '2147483648'");
  expectError(bytes + "Q== 300\n", "token 'Q==' is not base64");
  expectError(bytes + "QQ=A 300\n", "is not base64");
  expectError(bytes + "QR== 300\n", "is not base64");
  expectError(bytes + "YWI= 256\nYWI= 300\n",
              "line 258: token 'ab' (base64 YWI=) appears twice: ranks 256 and 300");
  expectError(bytes + "YWI= 256\neHl6 256\n", "line 258: rank 256 already belongs to the token of line 257");
  expectError(bytes + "YWI= 65\n", "rank 65 already belongs to the token of line 66");
  expectError(byteLines("\n", 0x41) + "YWI= 256\n", "byte 0x41 has no rank (base64 'QQ==')");
  expectError(bytes + "eHl6 100000\n", "rank 100000 is far beyond the 257 tokens");
  // A line longer than any message shows is cut.
  expectError(bytes + std::string(100000, 'A') + "\n", "line 257: expected");
}

// A file cut anywhere inside a line is an error (the last field is then missing,
// not base64, or a shortened rank that an earlier line already has); a file cut
// right after a line end is a shorter, valid file when it still has every byte.
TEST(TiktokenRanks, TruncatedFilesFailInsideALine) {
  const std::string full = tinyFile();
  for (size_t n = 0; n < full.size(); ++n) {
    const std::string cut = full.substr(0, n);
    auto r = TiktokenRanks::parse(cut, "t.tiktoken");
    // Whole lines: cut after a line end, or right before one (the last line then has no end).
    const bool whole_lines = n > 0 && (full[n - 1] == '\n' || full[n] == '\n');
    const size_t lines =
        static_cast<size_t>(std::count(cut.begin(), cut.end(), '\n')) + (full[n - 1] != '\n');
    if (whole_lines && lines >= 256) {
      EXPECT_TRUE(r.isOk()) << "cut at " << n << ": " << r.status().toString();
    } else {
      ASSERT_FALSE(r.isOk()) << "cut at " << n << " accepted";
      EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
    }
  }
}

TEST(TiktokenBpe, MergesByRankOnAHandCheckedVocabulary) {
  auto r = TiktokenRanks::parse(tinyFile(), "tiny.tiktoken");
  ASSERT_TRUE(r.isOk());
  auto merge = [&](std::string_view piece) {
    std::vector<TokenId> a, b, c;
    r->encodePiece(piece, a);
    r->mergeByScan(piece, b);
    r->mergeByHeap(piece, c);
    EXPECT_EQ(b, c) << piece;
    return a;
  };
  using V = std::vector<TokenId>;
  EXPECT_EQ(merge("abcd"), (V{258}));        // the whole piece is a token: tiktoken takes it directly
  EXPECT_EQ(merge("abcde"), (V{258, 'e'}));  // ab (256), then cd (257), then abcd (258)
  EXPECT_EQ(merge("bcd"), (V{'b', 257}));    // cd (257) before bc (259): the lowest rank, not the leftmost
  EXPECT_EQ(merge("aaaa"), (V{260, 260}));   // equal ranks: the leftmost first
  EXPECT_EQ(merge("aaa"), (V{260, 'a'}));
  EXPECT_EQ(merge(" bcd"), (V{262, 257}));  // cd, then " b"
  EXPECT_EQ(merge("x"), (V{'x'}));
  EXPECT_EQ(merge("\xFF\xFE"), (V{0xFF, 0xFE}));  // any bytes
}

TEST(Tiktoken, EncodesQwenStyle) {
  auto t = tinyTokenizer();
  ASSERT_NE(t, nullptr);
  using V = std::vector<TokenId>;
  auto enc = [&](std::string_view s) { return encodeOk(*t, s, false); };
  EXPECT_EQ(enc(""), V{});
  EXPECT_EQ(enc("abcde bcd"), (V{258, 'e', 262, 257}));
  EXPECT_EQ(enc("2024"), (V{'2', '0', '2', '4'}));  // \p{N}: digits one by one
  EXPECT_EQ(enc("I'M"), (V{'I', '\'', 'M'}));       // (?i:'m) is its own piece: "'M" has no merge
  EXPECT_EQ(enc("a   b"), (V{'a', 261, 262}));      // \s+(?!\S) leaves the last space to " b"
  EXPECT_EQ(enc("a\r\n\r\nb"), (V{'a', '\r', '\n', '\r', '\n', 'b'}));
  // Special tokens in the text (allowed_special="all").
  EXPECT_EQ(enc("<|im_start|>abcd<|im_end|>"), (V{151644, 258, 151645}));
  EXPECT_EQ(enc("x<|endoftext|><|extra_204|>"), (V{'x', 151643, 151850}));
  EXPECT_EQ(enc("<|im_start"), (V{'<', '|', 'i', 'm', '_', 's', 't', 'a', 'r', 't'}));
  // NFC first: e + U+0301 becomes U+00E9.
  EXPECT_EQ(enc("e\xCC\x81"), (V{0xC3, 0xA9}));
  // Invalid UTF-8 becomes U+FFFD, which joins the following letter (its class is [^\r\n\p{L}\p{N}]).
  EXPECT_EQ(enc("a\xFF"
                "b"),
            (V{'a', 0xEF, 0xBF, 0xBD, 'b'}));
  // No BOS / EOS.
  EXPECT_EQ(encodeOk(*t, "abcd", true), (V{258}));
  EXPECT_TRUE(t->specialPrefixIds().empty());
  EXPECT_TRUE(t->specialSuffixIds().empty());
}

TEST(Tiktoken, DecodesAndNamesTokens) {
  auto t = tinyTokenizer();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->decode({258, 'e', 262, 257}), "abcde bcd");
  EXPECT_EQ(t->decode({151644, 'a', 151645}), "<|im_start|>a<|im_end|>");
  EXPECT_EQ(t->decode({151644, 'a', 151645}, true), "a");
  EXPECT_EQ(t->decode({0xC3}), "\xEF\xBF\xBD");               // an incomplete character: U+FFFD
  EXPECT_EQ(t->decode({0xC3, 0xA9, 99999, -1}), "\xC3\xA9");  // unknown ids are skipped
  EXPECT_EQ(t->vocabSize(), 151851u);
  EXPECT_EQ(t->idToToken(262), std::optional<std::string>("\xC4\xA0"
                                                          "b"));  // "Ġb"
  EXPECT_EQ(t->idToToken(151850), std::optional<std::string>("<|extra_204|>"));
  EXPECT_EQ(t->idToToken(263), std::nullopt);
  EXPECT_EQ(t->tokenToId("\xC4\xA0"
                         "b"),
            std::optional<TokenId>(262));
  EXPECT_EQ(t->tokenToId(" b"), std::optional<TokenId>(262));  // raw bytes too
  EXPECT_EQ(t->tokenToId("<|im_end|>"), std::optional<TokenId>(151645));
  EXPECT_EQ(t->tokenToId("abc"), std::nullopt);
  EXPECT_TRUE(t->isSpecial(151643));
  EXPECT_FALSE(t->isSpecial('a'));
  EXPECT_EQ(t->addedTokens().size(), 208u);
  // Streaming gives decode()'s text, split characters held back.
  const std::vector<TokenId> ids = encodeOk(*t, "caf\xC3\xA9 <|im_end|> \xE6\x97\xA5 ok", false);
  StreamDecoder sd(*t);
  std::string streamed;
  for (TokenId id : ids) streamed += sd.step(id);
  streamed += sd.flush();
  EXPECT_EQ(streamed, t->decode(ids));
}

TEST(Tiktoken, SpecialIdsMustNotBeRanks) {
  auto r = TiktokenRanks::parse(tinyFile(), "t.tiktoken");
  ASSERT_TRUE(r.isOk());
  tok::TiktokenOptions o;
  o.special_tokens = {{"<|x|>", 258}};
  auto t = TiktokenTokenizer::create(std::move(r).value(), o, "t.tiktoken");
  ASSERT_FALSE(t.isOk());
  EXPECT_NE(t.status().message().find("id 258, which is the rank of token 'abcd'"), std::string::npos)
      << t.status().message();
}

// The heap merge (long pieces) and tiktoken's scan (short pieces) agree on
// random pieces over a random vocabulary of short strings.
TEST(TiktokenBpe, HeapMergeEqualsScanMerge) {
  std::mt19937 rng(1234);
  std::string file = byteLines();
  std::set<std::string> seen;
  std::vector<std::string> tokens;
  while (tokens.size() < 300) {
    std::string s;
    const int len = 2 + static_cast<int>(rng() % 5);
    for (int i = 0; i < len; ++i) s.push_back("abcd"[rng() % 4]);
    if (seen.insert(s).second) tokens.push_back(s);
  }
  std::vector<int> ranks(tokens.size());
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = 256 + static_cast<int>(i);
  std::shuffle(ranks.begin(), ranks.end(), rng);
  for (size_t i = 0; i < tokens.size(); ++i)
    file += tok::encodeBase64(tokens[i]) + " " + std::to_string(ranks[i]) + "\n";
  auto r = TiktokenRanks::parse(file, "random.tiktoken");
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  for (int iter = 0; iter < 3000; ++iter) {
    std::string piece;
    const int len = 1 + static_cast<int>(rng() % (iter < 2000 ? 24 : 300));
    for (int i = 0; i < len; ++i) piece.push_back("abcde"[rng() % 5]);
    std::vector<TokenId> scan, heap;
    r->mergeByScan(piece, scan);
    r->mergeByHeap(piece, heap);
    ASSERT_EQ(scan, heap) << piece;
    std::string joined;
    for (TokenId id : heap) joined += r->bytes(id);
    ASSERT_EQ(joined, piece);
  }
}

// A megabyte-long piece (one run of letters, one of spaces) takes the heap
// path: linear-logarithmic, not tiktoken's quadratic scan.
TEST(Tiktoken, MegabytePiecesAreFast) {
  auto t = tinyTokenizer();
  ASSERT_NE(t, nullptr);
  const auto start = std::chrono::steady_clock::now();
  const size_t n = 1 << 20;
  std::vector<TokenId> a = encodeOk(*t, std::string(n + 1, 'a'), false);
  ASSERT_EQ(a.size(), n / 2 + 1);
  EXPECT_TRUE(std::all_of(a.begin(), a.end() - 1, [](TokenId id) { return id == 260; }));
  EXPECT_EQ(a.back(), 'a');
  std::vector<TokenId> s = encodeOk(*t, std::string(n, ' '), false);
  ASSERT_EQ(s.size(), n / 2);
  EXPECT_TRUE(std::all_of(s.begin(), s.end(), [](TokenId id) { return id == 261; }));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 20.0);
}

// ---- real vocabularies, built at run time from shared tokenizer.json files ----

struct SharedCase {
  std::string text;
  std::vector<TokenId> ids;
};

// strings.json with the ids expected_ids.json records for `rel`.
std::vector<SharedCase> sharedExpected(const std::string& rel) {
  std::vector<SharedCase> out;
  const std::string expected_path = sharedPath("tokenizers/tests/expected_ids.json");
  const std::string strings_path = sharedPath("tokenizers/tests/strings.json");
  if (!pathExists(expected_path) || !pathExists(strings_path)) return out;
  const json expected = readJsonFile(expected_path);
  const json strings = readJsonFile(strings_path);
  const json& ids = expected["tokenizers"][rel]["ids"];
  for (size_t i = 0; i < strings.size() && i < ids.size(); ++i)
    out.push_back({strings[i]["text"].get<std::string>(), toIds(ids[i])});
  return out;
}

bool containsAny(const std::string& text, const std::set<std::string>& tokens) {
  for (const std::string& t : tokens)
    if (text.find(t) != std::string::npos) return true;
  return false;
}

// The Qwen2 vocabulary is qwen.tiktoken's (rank = id), and Qwen2's
// tokenizer.json has Qwen v1's pattern and NFC: our tiktoken path with Qwen's
// setup must give HF's ids for every text without Qwen2-only added tokens.
TEST(TiktokenReal, QwenVocabularyMatchesHf) {
  const std::string src = sharedPath("tokenizers/qwen2-family/tokenizer.json");
  const TiktokenFromJson& file = tiktokenFromTokenizerJson(src);
  if (file.contents.empty()) GTEST_SKIP() << "shared test data absent: " << src;
  ASSERT_EQ(file.ranks, 151643u);
  auto t = TiktokenTokenizer::fromContents(file.contents, "qwen.tiktoken");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  const TiktokenTokenizer& q = **t;
  std::set<std::string> qwen2_only = file.added;
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) qwen2_only.erase(s);

  size_t checked = 0;
  for (const SharedCase& c : sharedExpected("tokenizers/qwen2-family/tokenizer.json")) {
    EXPECT_EQ(encodeOk(q, c.text, false), c.ids) << escapeForMessage(c.text);
    EXPECT_EQ(q.decode(c.ids), tok::normalizeUnicode(c.text, tok::NormForm::kNFC));
    ++checked;
  }
  const std::string corpus = tokenizerDataPath("expected_qwen2-family.json");
  ASSERT_TRUE(pathExists(corpus));
  const json fixture = readJsonFile(corpus);
  for (const json& c : fixture["cases"]) {
    const std::string text = c["text"].get<std::string>();
    if (containsAny(text, qwen2_only)) continue;
    const std::vector<TokenId> ids = toIds(c["ids"]);
    EXPECT_EQ(encodeOk(q, text, false), ids) << c["id"];
    EXPECT_EQ(q.decode(toIds(c["ids_special"])), c["decode"].get<std::string>()) << c["id"];
    EXPECT_EQ(q.decode(toIds(c["ids_special"]), true), c["decode_skip"].get<std::string>()) << c["id"];
    ++checked;
  }
  EXPECT_GT(checked, 120u);
}

// Concurrent encode from several threads gives the single-threaded results.
TEST(TiktokenReal, ThreadSafe) {
  const std::string src = sharedPath("tokenizers/qwen2-family/tokenizer.json");
  const TiktokenFromJson& file = tiktokenFromTokenizerJson(src);
  if (file.contents.empty()) GTEST_SKIP() << "shared test data absent: " << src;
  auto t = TiktokenTokenizer::fromContents(file.contents, "qwen.tiktoken");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  const json corpus = readJsonFile(tokenizerDataPath("corpus.json"));
  std::vector<std::string> texts;
  std::vector<std::vector<TokenId>> want;
  for (const json& c : corpus) {
    texts.push_back(c["text"].get<std::string>());
    want.push_back(encodeOk(**t, texts.back(), false));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 20; ++round)
        for (size_t i = (k + round) % 3; i < texts.size(); i += 3) {
          auto ids = (*t)->encode(texts[i], false);
          if (!ids.isOk() || *ids != want[i]) ++bad;
        }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// GPT-2's vocabulary by rank with GPT-2's own pattern (what tiktoken's r50k_base
// is) gives HF's GPT-2 ids.
TEST(TiktokenReal, Gpt2VocabularyWithGpt2PatternMatchesHf) {
  const std::string src = sharedPath("tokenizers/gpt2/tokenizer.json");
  const TiktokenFromJson& file = tiktokenFromTokenizerJson(src);
  if (file.contents.empty()) GTEST_SKIP() << "shared test data absent: " << src;
  auto ranks = TiktokenRanks::parse(file.contents, "gpt2.tiktoken");
  ASSERT_TRUE(ranks.isOk()) << ranks.status().toString();
  ASSERT_EQ(ranks->rankLimit(), 50256u);
  tok::TiktokenOptions o;
  o.pattern = std::string(tok::kGpt2SplitPattern);
  o.nfc = false;
  o.special_tokens = {{"<|endoftext|>", 50256}};
  auto t = TiktokenTokenizer::create(std::move(ranks).value(), o, "gpt2.tiktoken");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  size_t checked = 0;
  for (const SharedCase& c : sharedExpected("tokenizers/gpt2/tokenizer.json")) {
    EXPECT_EQ(encodeOk(**t, c.text, false), c.ids) << escapeForMessage(c.text);
    ++checked;
  }
  const std::string corpus = tokenizerDataPath("expected_gpt2.json");
  ASSERT_TRUE(pathExists(corpus));
  const json fixture = readJsonFile(corpus);
  for (const json& c : fixture["cases"]) {
    EXPECT_EQ(encodeOk(**t, c["text"].get<std::string>(), false), toIds(c["ids"])) << c["id"];
    EXPECT_EQ((*t)->decode(toIds(c["ids_special"])), c["decode"].get<std::string>()) << c["id"];
    ++checked;
  }
  EXPECT_GT(checked, 120u);
}

// Python tiktoken's ids (scripts/golden/make_tokenizer_model_ids.py, run where
// tiktoken is installed) for each vocabulary it recorded, with Qwen's setup.
TEST(TiktokenReal, MatchesPythonTiktoken) {
  const std::string fixture = tokenizerDataPath("tiktoken_ids.json");
  if (!pathExists(fixture))
    GTEST_SKIP() << fixture << " absent: run scripts/golden/make_tokenizer_model_ids.py where Python's "
                 << "tiktoken is installed";
  const json root = readJsonFile(fixture);
  const std::vector<std::string> texts = root["texts"].get<std::vector<std::string>>();
  size_t vocabularies = 0;
  for (const auto& [name, enc] : root["encodings"].items()) {
    const std::string src = sharedPath(enc["source"].get<std::string>());
    const TiktokenFromJson& file = tiktokenFromTokenizerJson(src);
    if (file.contents.empty()) {
      std::printf("[ skip ] %s: %s absent\n", name.c_str(), src.c_str());
      continue;
    }
    auto t = TiktokenTokenizer::fromContents(file.contents, name + ".tiktoken");
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    EXPECT_EQ(enc["special_start"].get<TokenId>(), *(*t)->tokenToId("<|endoftext|>")) << name;
    const json& cases = enc["cases"];
    ASSERT_EQ(cases.size(), texts.size()) << name;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::vector<TokenId> ids = toIds(cases[i]["ids"]);
      EXPECT_EQ(encodeOk(**t, texts[i], false), ids)
          << name << " text " << i << " " << escapeForMessage(texts[i]);
      EXPECT_EQ((*t)->decode(ids), cases[i]["decoded"].get<std::string>()) << name << " text " << i;
    }
    ++vocabularies;
  }
  if (vocabularies == 0) GTEST_SKIP() << "no vocabulary of " << fixture << " is in the shared test data";
}

}  // namespace
}  // namespace llmrt::testing
