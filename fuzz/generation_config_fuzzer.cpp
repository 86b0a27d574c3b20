// libFuzzer target: the input bytes are generation_config.json text
// (parseGenerationConfig). Any result is fine; a crash, a sanitizer report, an
// accepted value outside its documented range, or an error message that is
// empty, spans lines or runs past 4 KB is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/logging.h"
#include "fuzz_util.h"
#include "loader/config_parser.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  llmrt::fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = llmrt::parseGenerationConfig(text, "fuzz/generation_config.json");
  if (!g.isOk()) {
    llmrt::fuzz::checkMessage(g.status());
    return 0;
  }
  if (g->temperature && !(*g->temperature >= 0)) std::abort();
  if (g->top_p && !(*g->top_p > 0 && *g->top_p <= 1)) std::abort();
  if (g->min_p && !(*g->min_p >= 0 && *g->min_p <= 1)) std::abort();
  if (g->repetition_penalty && !(*g->repetition_penalty > 0)) std::abort();
  for (const auto& v : {g->top_k, g->max_new_tokens, g->max_length, g->pad_token_id}) {
    if (v && *v < 0) std::abort();
  }
  for (int64_t id : g->bos_token_ids) {
    if (id < 0) std::abort();
  }
  for (int64_t id : g->eos_token_ids) {
    if (id < 0) std::abort();
  }
  return 0;
}
