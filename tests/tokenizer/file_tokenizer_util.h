// Helpers for the tests of the tokenizers without tokenizer.json
// (SentencePiece tokenizer.model, tiktoken files): temporary directories, and
// .tiktoken files made at run time from the byte-level vocabulary of a shared
// tokenizer.json (rank = id), as scripts/golden/make_tokenizer_model_ids.py
// makes them for Python's tiktoken.
#pragma once

#include <set>
#include <string>
#include <string_view>

namespace llmrt::testing {

// A fresh directory under $LLMRT_TEST_TMP (or /tmp), removed with the object.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }
  // Writes `contents` to path()/name and returns the path.
  std::string write(std::string_view name, std::string_view contents) const;

 private:
  std::string path_;
};

struct TiktokenFromJson {
  std::string contents;         // "<base64> <rank>\n" lines
  std::set<std::string> added;  // the file's added tokens (left out of the ranks)
  size_t ranks = 0;
};

// The .tiktoken text of the tokenizer.json at `path` (its model.vocab with each
// token's byte-level characters turned back into bytes, rank = id, the added
// tokens left out); cached per process. Empty contents when the file is absent.
const TiktokenFromJson& tiktokenFromTokenizerJson(const std::string& path);

}  // namespace llmrt::testing
