#include "tokenizer/file_tokenizer_util.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/test_util.h"
#include "tokenizer/tiktoken_bpe.h"

namespace llmrt::testing {

TempDir::TempDir() {
  const char* base = std::getenv("LLMRT_TEST_TMP");
  std::string dir = base != nullptr && *base != '\0' ? base : "/tmp";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string tmpl = dir + "/llmrt-tok-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed under " << dir;
    return;
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(std::string_view name, std::string_view contents) const {
  const std::string p = file(name);
  std::ofstream out(p, std::ios::binary);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  EXPECT_TRUE(out.good()) << "writing " << p;
  return p;
}

const TiktokenFromJson& tiktokenFromTokenizerJson(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, TiktokenFromJson> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(path);
  if (it != cache.end()) return it->second;
  TiktokenFromJson out;
  if (pathExists(path)) {
    const nlohmann::json root = readJsonFile(path);
    for (const auto& a : root["added_tokens"]) out.added.insert(a["content"].get<std::string>());
    std::vector<std::string> by_rank;
    for (const auto& [token, id] : root["model"]["vocab"].items()) {
      if (out.added.count(token)) continue;
      std::string bytes;
      if (!tok::byteLevelDecode(token, bytes)) {
        ADD_FAILURE() << path << ": vocab token '" << escapeForMessage(token) << "' is not byte-level";
        continue;
      }
      const size_t r = id.get<size_t>();
      if (by_rank.size() <= r) by_rank.resize(r + 1);
      by_rank[r] = tok::encodeBase64(bytes) + " " + std::to_string(r) + "\n";
    }
    for (const std::string& line : by_rank) {
      out.contents += line;
      out.ranks += !line.empty();
    }
  }
  return cache.emplace(path, std::move(out)).first->second;
}

}  // namespace llmrt::testing
