#include "tokenizer/test_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

namespace llmrt::testing {

std::string sharedPath(const std::string& rel) { return std::string(LLMRT_SHARED_TESTDATA) + "/" + rel; }

std::string tokenizerDataPath(const std::string& rel) {
  return std::string(LLMRT_TEST_DATA) + "/tokenizer/" + rel;
}

bool pathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

const Tokenizer* cachedTokenizer(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(path);
  if (it != cache.end()) return it->second.get();
  if (!pathExists(path)) return nullptr;
  auto t = Tokenizer::fromFile(path);
  EXPECT_TRUE(t.isOk()) << path << ": " << t.status().toString();
  if (!t.isOk()) return nullptr;
  const Tokenizer* raw = t->get();
  cache[path] = std::move(t).value();
  return raw;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json readJsonFile(const std::string& path) { return nlohmann::json::parse(readFile(path)); }

const std::vector<NamedTokenizer>& sharedTokenizers() {
  static const std::vector<NamedTokenizer> list = {
      {"llama2", "tokenizers/llama2/tokenizer.json"},
      {"llama3", "tokenizers/llama3/tokenizer.json"},
      {"mistral", "tokenizers/mistral/tokenizer.json"},
      {"phi-3", "tokenizers/phi-3/tokenizer.json"},
      {"qwen2-family", "tokenizers/qwen2-family/tokenizer.json"},
      {"falcon", "tokenizers/falcon/tokenizer.json"},
      {"gpt2", "tokenizers/gpt2/tokenizer.json"},
      {"stories260K", "models/stories260K-hf/tokenizer.json"},
      {"aidreams260K", "models/aidreams260K-hf/tokenizer.json"},
      {"llama2xs", "models/llama2xs-tinystories-hf/tokenizer.json"},
  };
  return list;
}

Result<std::vector<TokenId>> tryEncode(const Tokenizer& tok, std::string_view text, bool add_special_tokens) {
  return tok.encode(text, add_special_tokens);
}

std::vector<TokenId> encodeOk(const Tokenizer& tok, std::string_view text, bool add_special_tokens) {
  auto ids = tryEncode(tok, text, add_special_tokens);
  EXPECT_TRUE(ids.isOk()) << ids.status().toString();
  if (!ids.isOk()) return {};
  return std::move(ids).value();
}

bool validUtf8(const std::string& s) {
  size_t i = 0;
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  while (i < s.size()) {
    unsigned char c = b(i);
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      unsigned char x = b(i + k);
      if (x < (k == 1 ? lo : 0x80) || x > (k == 1 ? hi : 0xBF)) return false;
    }
    i += n;
  }
  return true;
}

std::string idsToString(const std::vector<TokenId>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

std::string escapeForMessage(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

}  // namespace llmrt::testing
