// libFuzzer target: the input bytes are a tokenizer.json, loaded with
// Tokenizer::fromJson. A load error must be one line of at most 4 KB. A
// tokenizer that loads must encode a few texts (an encode error is fine - a
// regex of the file may give up - but it too must be one short line), every id
// it gives must be in its vocabulary (post-processor and padding ids are
// checked at load), the ids must stay within the padding / rewrite bounds, and
// decode() must give valid UTF-8. Streaming runs too, for crashes and
// sanitizer reports only: exotic decoders (a Replace across tokens) may
// legitimately stream differently.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/logging.h"
#include "fuzz_util.h"
#include "llmrt/tokenizer.h"
#include "tokenizer/unicode.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  llmrt::fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto tok = llmrt::Tokenizer::fromJson(text, "fuzz/tokenizer.json");
  if (!tok.isOk()) {
    llmrt::fuzz::checkMessage(tok.status());
    return 0;
  }
  const llmrt::Tokenizer& t = **tok;
  const std::string inputs[] = {
      "",
      "Hello world! 123 4567",
      "the ab th\xE2\x82\xAC 12-3 A. caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC",
      "<s>a</s><|end|>[CLS] b\xFF\xFE",
      "   \n\n\t  x  ",
      std::string(text.substr(0, 64)),
  };
  const size_t affixes = t.specialPrefixIds().size() + t.specialSuffixIds().size();
  for (const std::string& in : inputs) {
    for (bool add_special : {false, true}) {
      auto ids = t.encode(in, add_special);
      if (!ids.isOk()) {
        llmrt::fuzz::checkMessage(ids.status());
        continue;
      }
      // Padding is at most 2^20 ids; the rest is bounded by the text (each
      // byte, rewritten at most 16x + 4 KiB per step, gives at most one id).
      if (ids->size() > (size_t{1} << 20) + affixes + 64 * (in.size() + 4096)) std::abort();
      // Every id when there are few, a sample of a long (padded) sequence.
      const size_t stride = ids->size() <= 4096 ? 1 : ids->size() / 4096;
      for (size_t i = 0; i < ids->size(); i += stride)
        if (!t.idToToken((*ids)[i]).has_value()) std::abort();
      if (!ids->empty() && !t.idToToken(ids->back()).has_value()) std::abort();
      if (ids->size() > 65536) continue;
      for (bool skip : {false, true}) {
        const std::string decoded = t.decode(*ids, skip);
        if (!llmrt::tok::isValidUtf8(decoded)) std::abort();
        if (ids->size() <= 4096) {
          llmrt::StreamDecoder sd(t, skip);
          for (llmrt::TokenId id : *ids) (void)sd.step(id);
          (void)sd.flush();
        }
      }
    }
  }
  return 0;
}
