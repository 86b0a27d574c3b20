// Encode throughput of llmrt's tokenizer, single-threaded.
//
//   llmrt_tokenizer_bench TOKENIZER_JSON TEXT_FILE [--repeat N] [--doc-bytes B] [--no-special]
//
// The text is cut into documents at blank lines ("\n\n", kept with the
// paragraph before it), paragraphs being joined until a document has at
// least B bytes (default 2000) - the same cut scripts/bench/hf_tokenizer_bench.py
// makes, so both encode the same documents. Every document is encoded with
// add_special_tokens (unless --no-special); the best of N passes is reported
// as MB/s (10^6 bytes) and tokens/s, then as one JSON line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "llmrt/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<std::string_view> splitDocuments(std::string_view text, size_t doc_bytes) {
  std::vector<std::string_view> docs;
  size_t start = 0, pos = 0;
  while (pos < text.size()) {
    size_t hit = text.find("\n\n", pos);
    size_t end = hit == std::string_view::npos ? text.size() : hit + 2;
    pos = end;
    if (end - start >= doc_bytes || end == text.size()) {
      docs.push_back(text.substr(start, end - start));
      start = end;
    }
  }
  return docs;
}

std::string jsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON TEXT_FILE [--repeat N] [--doc-bytes B] [--no-special]\n",
                 argv[0]);
    return 2;
  }
  std::string tok_path = argv[1], text_path = argv[2];
  int repeat = 3;
  size_t doc_bytes = 2000;
  bool add_special = true;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--doc-bytes") && i + 1 < argc) {
      doc_bytes = static_cast<size_t>(std::max(1, std::atoi(argv[++i])));
    } else if (!std::strcmp(argv[i], "--no-special")) {
      add_special = false;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }

  auto t0 = Clock::now();
  auto tok = llmrt::Tokenizer::fromFile(tok_path);
  double load_s = secondsSince(t0);
  if (!tok.isOk()) {
    std::fprintf(stderr, "%s\n", tok.status().toString().c_str());
    return 1;
  }
  std::ifstream in(text_path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", text_path.c_str());
    return 1;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  std::vector<std::string_view> docs = splitDocuments(text, doc_bytes);

  double best = 1e30;
  size_t tokens = 0;
  for (int r = 0; r < repeat; ++r) {
    size_t n = 0;
    auto start = Clock::now();
    for (std::string_view d : docs) {
      auto ids = (*tok)->encode(d, add_special);
      if (!ids.isOk()) {
        std::fprintf(stderr, "%s\n", ids.status().toString().c_str());
        return 1;
      }
      n += ids->size();
    }
    double s = secondsSince(start);
    best = std::min(best, s);
    tokens = n;
  }
  double mb_s = static_cast<double>(text.size()) / 1e6 / best;
  double tok_s = static_cast<double>(tokens) / best;
  std::printf("tokenizer   %s (loaded in %.2f s)\n", tok_path.c_str(), load_s);
  std::printf("text        %s: %zu bytes, %zu documents (>= %zu bytes each)\n", text_path.c_str(),
              text.size(), docs.size(), doc_bytes);
  std::printf("encode      %zu tokens, best of %d: %.3f s -> %.2f MB/s, %.0f tokens/s (1 thread)\n", tokens,
              repeat, best, mb_s, tok_s);
  std::printf(
      "{\"impl\": \"llmrt\", \"tokenizer\": \"%s\", \"bytes\": %zu, \"documents\": %zu, \"tokens\": %zu, "
      "\"seconds\": %.6f, \"mb_per_s\": %.3f, \"tokens_per_s\": %.1f, \"load_seconds\": %.3f, \"threads\": "
      "1}\n",
      jsonEscape(tok_path).c_str(), text.size(), docs.size(), tokens, best, mb_s, tok_s, load_s);
  return 0;
}
