// libFuzzer target: the server's request validation. The first byte picks the endpoint
// (/v1/completions or /v1/chat/completions); the rest is the HTTP body, read as the server reads
// it (parseJsonObject, then readCompletionRequest with the bundled model's tokenizer and a ChatML
// template). Any answer is fine; a crash or sanitizer report is a bug, as is an accepted request
// outside the server's limits (an empty prompt, a prompt over max_input_len, prompt + max_tokens
// over the context, invalid sampling parameters) or an error that is not a one-line 400/404.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "fuzz_util.h"
#include "llmrt/chat_template.h"
#include "llmrt/request_json.h"
#include "llmrt/tokenizer.h"
#include "openai_api.h"

namespace {

struct Fixture {
  std::unique_ptr<llmrt::Tokenizer> tokenizer;
  std::optional<llmrt::ChatTemplate> chat;
  llmrt::serve::ModelContext ctx;
  Fixture() {
    llmrt::fuzz::quiet();
    auto tok = llmrt::Tokenizer::fromFile(std::string(LLMRT_SOURCE_DIR) + "/models/llmrt-tiny/tokenizer.json");
    if (!tok.isOk()) std::abort();
    tokenizer = std::move(*tok);
    auto t = llmrt::ChatTemplate::parse(
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");
    if (!t.isOk()) std::abort();
    chat = std::move(*t);
    ctx.model_name = "tiny";
    ctx.tokenizer = tokenizer.get();
    ctx.chat_template = &*chat;
    ctx.vocab_size = static_cast<int64_t>(tokenizer->vocabSize());
    ctx.max_seq_len = 512;
    ctx.max_input_len = 400;
    ctx.max_output_len = 300;
    ctx.defaults.max_tokens = 16;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture f;
  if (size == 0) return 0;
  const bool chat = data[0] & 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  auto parsed = llmrt::parseJsonObject(body, "request body");
  if (!parsed.isOk()) {
    llmrt::fuzz::checkMessage(parsed.status());
    return 0;
  }
  auto r = llmrt::serve::readCompletionRequest(*parsed, f.ctx, chat);
  if (auto* e = std::get_if<llmrt::serve::ApiError>(&r)) {
    if (e->status != 400 && e->status != 404) std::abort();
    llmrt::fuzz::checkMessage(llmrt::invalidArgument(e->message));
    return 0;
  }
  const auto& job = std::get<llmrt::serve::CompletionJob>(r);
  if (job.prompts.empty() || job.prompts.size() != job.max_tokens.size() || job.prompts.size() != job.prompt_texts.size())
    std::abort();
  for (size_t i = 0; i < job.prompts.size(); ++i) {
    const int64_t len = static_cast<int64_t>(job.prompts[i].size());
    if (len == 0 || len > f.ctx.max_input_len) std::abort();
    if (job.max_tokens[i] < 0 || job.max_tokens[i] > f.ctx.max_output_len || len + job.max_tokens[i] > f.ctx.max_seq_len)
      std::abort();
    if (job.max_tokens[i] == 0 && !job.echo) std::abort();
    for (llmrt::TokenId t : job.prompts[i])
      if (t < 0 || t >= f.ctx.vocab_size) std::abort();
  }
  if (!job.params.validate(f.ctx.vocab_size).isOk()) std::abort();
  return 0;
}
