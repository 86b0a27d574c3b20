// libFuzzer target: the input bytes are a JSON-lines request file, read as
// `llmrt generate --input-file` reads it (parseJsonLinesRequests, which runs
// parseJsonRequest on each line). Any result is fine; a crash or sanitizer
// report is a bug, as is an accepted request outside the documented ranges
// (SamplingParams::validate; each retention field's range), a line with
// both or neither of a request and an error, and an error message that is
// empty, spans lines, runs past 4 KB or does not name the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "llmrt/request_json.h"

namespace {

// The common checks, and the message names the file.
void checkMessage(const llmrt::Status& s) {
  llmrt::fuzz::checkMessage(s);
  if (s.message().rfind("fuzz.jsonl", 0) != 0) std::abort();
}

void checkRequest(const llmrt::JsonRequest& r) {
  if (r.prompt.text.has_value() == !r.prompt.token_ids.empty()) std::abort();  // exactly one prompt form
  for (llmrt::TokenId id : r.prompt.token_ids)
    if (id < 0) std::abort();
  const llmrt::SamplingParams& p = r.sampling_params;
  // Every field is range-checked on reading; only min_tokens <= max_tokens is left to run time.
  if (p.min_tokens <= p.max_tokens && !p.validate(int64_t{1} << 31).isOk()) std::abort();
  if (p.top_k < 0) std::abort();
  if (const auto& rc = r.options.kv_cache_retention_config) {
    using Kv = llmrt::KvCacheRetentionConfig;
    auto bad_priority = [](int32_t p) { return p < Kv::kMinPriority || p > Kv::kMaxPriority; };
    auto bad_duration = [](const std::optional<int64_t>& d) {
      return d && (*d < 1 || *d > llmrt::kMaxRetentionDurationMs);
    };
    for (const llmrt::TokenRangeRetentionConfig& t : rc->token_range_retention_configs)
      if (t.token_start < 0 || (t.token_end && *t.token_end < 1) || bad_priority(t.priority) ||
          bad_duration(t.duration_ms))
        std::abort();
    if (bad_priority(rc->decode_retention_priority) || bad_duration(rc->decode_duration_ms)) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto lines = llmrt::parseJsonLinesRequests(text, llmrt::SamplingParams{}, "fuzz.jsonl");
  if (!lines.isOk()) {
    checkMessage(lines.status());
    return 0;
  }
  if (lines->empty()) std::abort();
  int last = 0;
  for (const llmrt::JsonLineRequest& l : *lines) {
    if (l.line <= last) std::abort();  // in order, one entry per line
    last = l.line;
    if (l.request.has_value() == !l.error.isOk()) std::abort();
    if (l.request) {
      checkRequest(*l.request);
    } else {
      checkMessage(l.error);
    }
  }
  return 0;
}
