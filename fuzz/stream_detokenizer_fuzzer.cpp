// libFuzzer target: streaming detokenization (StreamDecoder) against decode()
// on real tokenizers - the bundled models/llmrt-tiny tokenizer and, when
// ../shared/testdata is there, stories260K, Llama-2, Phi-3 and GPT-2 (byte
// fallback, Metaspace / Strip, special tokens, byte-level). Byte 0 of the input
// picks the tokenizer, skip_special_tokens and whether the first ids are a
// prompt; then every 2 bytes are one id, by their top bits a byte token, an
// added / special token, an id just past the vocabulary, or any vocabulary id.
// The pieces plus flush() must equal decode(ids) and each piece must be valid
// UTF-8; after a prompt, decode(prompt) + pieces must equal decode(prompt +
// ids) whenever decode(prompt) is a prefix of it. Inputs may be of any size;
// the ids come from the first 64 KiB.
//
// LLMRT_FUZZ_TOKENIZERS (paths separated by ':') replaces the list.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/logging.h"
#include "llmrt/tokenizer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace {

struct Loaded {
  std::string path;
  std::unique_ptr<llmrt::Tokenizer> tok;
  std::vector<llmrt::TokenId> byte_ids;   // <0xXX> and byte-level single-byte tokens
  std::vector<llmrt::TokenId> added_ids;  // added (special and user) tokens
};

std::vector<Loaded>& tokenizers() {
  static std::vector<Loaded> list;
  return list;
}

std::vector<std::string> tokenizerPaths() {
  if (const char* env = std::getenv("LLMRT_FUZZ_TOKENIZERS")) {
    std::vector<std::string> out;
    std::string s = env;
    size_t start = 0;
    while (start <= s.size()) {
      size_t colon = s.find(':', start);
      if (colon == std::string::npos) colon = s.size();
      if (colon > start) out.push_back(s.substr(start, colon - start));
      start = colon + 1;
    }
    return out;
  }
  const char* shared_env = std::getenv("LLMRT_SHARED_TESTDATA");
  const std::string shared = shared_env != nullptr ? shared_env : LLMRT_SHARED_TESTDATA;
  return {std::string(LLMRT_SOURCE_DIR) + "/models/llmrt-tiny/tokenizer.json",
          shared + "/models/stories260K-hf/tokenizer.json", shared + "/tokenizers/llama2/tokenizer.json",
          shared + "/tokenizers/phi-3/tokenizer.json", shared + "/tokenizers/gpt2/tokenizer.json"};
}

std::string join(const std::vector<std::string>& pieces) {
  std::string all;
  for (const std::string& p : pieces) all += p;
  return all;
}

// Streams `ids` after `prompt`; aborts on a piece that is not valid UTF-8.
std::string stream(const llmrt::Tokenizer& tok, bool skip, const std::vector<llmrt::TokenId>& prompt,
                   const std::vector<llmrt::TokenId>& ids) {
  llmrt::StreamDecoder sd(tok, skip, prompt);
  std::vector<std::string> pieces;
  for (llmrt::TokenId id : ids) pieces.push_back(sd.step(id));
  pieces.push_back(sd.flush());
  for (const std::string& p : pieces)
    if (!llmrt::tok::isValidUtf8(p)) std::abort();
  return join(pieces);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  llmrt::setLogLevel(llmrt::LogLevel::kOff);
  for (const std::string& path : tokenizerPaths()) {
    if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
      std::fclose(f);
    } else {
      continue;  // shared test data absent
    }
    auto t = llmrt::Tokenizer::fromFile(path);
    if (!t.isOk()) {
      std::fprintf(stderr, "stream_detokenizer_fuzzer: %s\n", t.status().toString().c_str());
      std::abort();
    }
    Loaded l{path, std::move(t).value(), {}, {}};
    char buf[8];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
      if (auto id = l.tok->tokenToId(buf)) l.byte_ids.push_back(*id);
      if (auto id = l.tok->tokenToId(llmrt::tok::byteLevelAlphabet().byte_to_utf8[b]))
        l.byte_ids.push_back(*id);
    }
    for (const llmrt::AddedTokenInfo& a : l.tok->addedTokens()) l.added_ids.push_back(a.id);
    std::fprintf(stderr, "stream_detokenizer_fuzzer: %s (%zu tokens, %zu byte tokens)\n", path.c_str(),
                 l.tok->vocabSize(), l.byte_ids.size());
    tokenizers().push_back(std::move(l));
  }
  if (tokenizers().empty()) {
    std::fprintf(stderr, "stream_detokenizer_fuzzer: no tokenizer found\n");
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const Loaded& l = tokenizers()[data[0] % tokenizers().size()];
  const bool skip = (data[0] >> 4) & 1;
  const bool with_prompt = (data[0] >> 5) & 1;
  const auto vocab = static_cast<uint32_t>(l.tok->vocabSize());
  // At most 2^15 ids (the first 64 KiB of an input): enough to expose any
  // cost that grows faster than the ids (2^30 steps would time out), while a
  // run stays within a few seconds under ASan (streaming costs ~30 us an id).
  const size_t n_bytes = std::min(size, size_t{1} + 2 * (size_t{1} << 15));
  std::vector<llmrt::TokenId> ids;
  ids.reserve(n_bytes / 2);
  for (size_t i = 1; i + 1 < n_bytes; i += 2) {
    const uint32_t v = static_cast<uint32_t>(data[i]) << 8 | data[i + 1];
    switch (v >> 14) {
      case 0:
        ids.push_back(l.byte_ids.empty() ? static_cast<llmrt::TokenId>(v % vocab)
                                         : l.byte_ids[v % l.byte_ids.size()]);
        break;
      case 1:
        ids.push_back(l.added_ids.empty() ? static_cast<llmrt::TokenId>(vocab + v % 4)
                                          : l.added_ids[v % l.added_ids.size()]);
        break;
      case 2:
        // Mostly vocabulary ids, now and then one just past it (decode skips those).
        ids.push_back(
            static_cast<llmrt::TokenId>((v & 0xFF) < 8 ? vocab + (v & 3) : (v * 2654435761u) % vocab));
        break;
      default:
        ids.push_back(static_cast<llmrt::TokenId>((v * 40503u + (v >> 3)) % vocab));
        break;
    }
  }
  const std::string full = l.tok->decode(ids, skip);
  if (stream(*l.tok, skip, {}, ids) != full) {
    std::fprintf(stderr, "stream != decode on %s (skip=%d, %zu ids)\n", l.path.c_str(), skip, ids.size());
    std::abort();
  }
  if (with_prompt && !ids.empty()) {
    const size_t cut = (size > 1 ? data[1] : 0) % (ids.size() + 1);
    const std::vector<llmrt::TokenId> prompt(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(cut));
    const std::vector<llmrt::TokenId> gen(ids.begin() + static_cast<std::ptrdiff_t>(cut), ids.end());
    const std::string prefix = l.tok->decode(prompt, skip);
    if (full.compare(0, prefix.size(), prefix) == 0 && prefix + stream(*l.tok, skip, prompt, gen) != full) {
      std::fprintf(stderr, "prompt + stream != decode on %s (skip=%d, prompt %zu ids, %zu ids)\n",
                   l.path.c_str(), skip, prompt.size(), gen.size());
      std::abort();
    }
  }
  return 0;
}
