// Shared helpers for the tokenizer tests: paths of the third-party test data,
// a per-binary cache of loaded tokenizers (the big ones take a while to
// load), and small JSON / UTF-8 utilities.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "llmrt/tokenizer.h"

namespace llmrt::testing {

// LLMRT_SHARED_TESTDATA + "/" + rel.
std::string sharedPath(const std::string& rel);
// LLMRT_TEST_DATA + "/tokenizer/" + rel.
std::string tokenizerDataPath(const std::string& rel);
bool pathExists(const std::string& path);

// Loads (once per process) the tokenizer.json at `path`; nullptr when the
// file is absent. A file that exists but fails to load is a test failure.
const Tokenizer* cachedTokenizer(const std::string& path);

nlohmann::json readJsonFile(const std::string& path);
std::string readFile(const std::string& path);

// The tokenizers of ../shared/testdata that the parity tests cover, by name.
struct NamedTokenizer {
  std::string name;
  std::string rel_path;  // relative to LLMRT_SHARED_TESTDATA
};
const std::vector<NamedTokenizer>& sharedTokenizers();
inline void PrintTo(const NamedTokenizer& t, std::ostream* os) { *os << t.name; }

// tok.encode(text, add_special_tokens).
Result<std::vector<TokenId>> tryEncode(const Tokenizer& tok, std::string_view text, bool add_special_tokens = true);
// tok.encode(text, add_special_tokens), which must succeed (a failure is
// reported as a test failure and gives no ids).
std::vector<TokenId> encodeOk(const Tokenizer& tok, std::string_view text, bool add_special_tokens = true);

bool validUtf8(const std::string& s);
std::string idsToString(const std::vector<TokenId>& ids);
std::string escapeForMessage(const std::string& s);

}  // namespace llmrt::testing
