// libFuzzer target: the input bytes are a .tiktoken file (`base64(token) rank`
// lines), parsed with TiktokenRanks::parse and built into Qwen v1's tokenizer.
// A parse error must be one line of at most 4 KB. A file that loads must
// encode a few texts (its own first bytes among them): every id must name a
// token, the tokens' bytes must give back the (NFC, U+FFFD-repaired) text, the
// heap and scan merges must agree, and decode must give valid UTF-8.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/tiktoken_bpe.h"
#include "tokenizer/tiktoken_tokenizer.h"
#include "tokenizer/unicode.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  llmrt::fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmrt;
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  auto ranks = tok::TiktokenRanks::parse(file, "fuzz/qwen.tiktoken");
  if (!ranks.isOk()) {
    fuzz::checkMessage(ranks.status());
    return 0;
  }
  // The merge on a few pieces made of the file's own tokens' bytes.
  const std::string_view head = file.substr(0, 256);
  std::vector<TokenId> scan, heap;
  ranks->mergeByScan(head, scan);
  ranks->mergeByHeap(head, heap);
  if (scan != heap) std::abort();
  std::string joined;
  for (TokenId id : heap) {
    if (!ranks->hasRank(id)) std::abort();
    joined += ranks->bytes(id);
  }
  if (joined != head) std::abort();

  auto t = tok::TiktokenTokenizer::fromContents(file, "fuzz/qwen.tiktoken");
  if (!t.isOk()) {
    fuzz::checkMessage(t.status());
    return 0;
  }
  const std::string inputs[] = {
      "",
      "Hello world! 123 4567 I'M it's",
      "<|im_start|>user\nhi<|im_end|>\n<|endoftext|><|extra_204|>",
      "caf\xC3\xA9 e\xCC\x81 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\xA6\x99 \xFF\xFE   \r\n\r\n  x  ",
      std::string(file.substr(0, 512)),
  };
  for (const std::string& in : inputs) {
    auto ids = (*t)->encode(in, true);
    if (!ids.isOk()) {
      fuzz::checkMessage(ids.status());
      continue;
    }
    for (TokenId id : *ids)
      if (!(*t)->idToToken(id).has_value()) std::abort();
    const std::string decoded = (*t)->decode(*ids);
    if (!tok::isValidUtf8(decoded)) std::abort();
    // Without special token strings in the text, decode inverts encode (after NFC and repair).
    if (in.find("<|") == std::string::npos) {
      const std::string expected = tok::normalizeUnicode(tok::utf8Lossy(in), tok::NormForm::kNFC);
      if (decoded != expected) std::abort();
    }
  }
  return 0;
}
