// Which tokenizer a file or a model directory holds: Tokenizer::fromFile,
// fromDirectory and findInDirectory (llmrt/tokenizer.h).
#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/logging.h"
#include "core/mapped_file.h"
#include "llmrt/tokenizer.h"
#include "tokenizer/json_util.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/tiktoken_tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace llmrt {
namespace {

enum class FileKind { kJson, kSentencePiece, kTiktoken };

std::string baseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// By name: *.tiktoken; *.model or *.model.<anything> (Mistral's tokenizer.model.v3); else tokenizer.json.
FileKind kindOf(const std::string& path) {
  const std::string name = baseName(path);
  if (endsWith(name, ".tiktoken")) return FileKind::kTiktoken;
  if (endsWith(name, ".model") || name.find(".model.") != std::string::npos) return FileKind::kSentencePiece;
  return FileKind::kJson;
}

std::string joinPath(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

Result<std::unique_ptr<Tokenizer>> loadFile(const std::string& path, FileKind kind,
                                            const tok::TokenizerConfig* config) {
  LLMRT_ASSIGN_OR_RETURN(std::string bytes, readTextFile(path));
  switch (kind) {
    case FileKind::kTiktoken: {
      try {
        LLMRT_ASSIGN_OR_RETURN(auto t, tok::TiktokenTokenizer::fromContents(bytes, path));
        return std::unique_ptr<Tokenizer>(std::move(t));
      } catch (const std::bad_alloc&) {
        return resourceExhausted(path + ": out of memory while building the tokenizer");
      }
    }
    case FileKind::kSentencePiece:
      return tok::loadSentencePiece(bytes, path, config);
    case FileKind::kJson:
      break;
  }
  return Tokenizer::fromJson(bytes, path);
}

}  // namespace

namespace tok {

#ifndef LLMRT_HAS_SENTENCEPIECE
bool sentencePieceSupported() { return false; }

Result<std::unique_ptr<Tokenizer>> loadSentencePiece(std::string_view, std::string_view source,
                                                     const TokenizerConfig*) {
  return unimplemented(std::string(source) +
                       ": a SentencePiece model, but this build has no SentencePiece support (configure with "
                       "-DLLMRT_SENTENCEPIECE=ON; needs libsentencepiece-dev)");
}
#endif

}  // namespace tok

Result<std::unique_ptr<Tokenizer>> Tokenizer::fromFile(const std::string& path) {
  return loadFile(path, kindOf(path), nullptr);
}

std::optional<std::string> Tokenizer::findInDirectory(const std::string& dir) {
  for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
    const std::string p = joinPath(dir, name);
    if (fileExists(p)) return p;
  }
  std::vector<std::string> found;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (endsWith(name, ".tiktoken") && fileExists(joinPath(dir, name))) found.push_back(name);
  }
  if (found.empty()) return std::nullopt;
  std::sort(found.begin(), found.end());
  auto qwen = std::find(found.begin(), found.end(), "qwen.tiktoken");
  return joinPath(dir, qwen != found.end() ? *qwen : found.front());
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::fromDirectory(const std::string& dir) {
  const std::optional<std::string> path = findInDirectory(dir);
  if (!path) return std::unique_ptr<Tokenizer>();
  const FileKind kind = kindOf(*path);
  if (kind != FileKind::kSentencePiece) return loadFile(*path, kind, nullptr);
  LLMRT_ASSIGN_OR_RETURN(std::optional<tok::TokenizerConfig> config, tok::loadTokenizerConfig(dir));
  return loadFile(*path, kind, config ? &*config : nullptr);
}

}  // namespace llmrt
