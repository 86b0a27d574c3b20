// Shared helpers for the tokenizer tests: paths of the third-party test data,
// a per-binary cache of loaded tokenizers (the big ones take a while to
// load), and small JSON / UTF-8 utilities.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
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

bool validUtf8(const std::string& s);
std::string idsToString(const std::vector<TokenId>& ids);
std::string escapeForMessage(const std::string& s);

}  // namespace llmrt::testing
