// Chunked context with the EQUAL_PROGRESS policy: long prompts are computed in
// chunks of whole KV blocks, one chunk of every waiting prompt per round, so
// all of them progress together while generation keeps flowing.
#include "example_util.h"

int main(int argc, char** argv) {
  const std::string model = example::modelDir(argc, argv);
  if (model.empty()) return example::kSkip;
  llmrt::KvCacheConfig kv_cache_config;
  kv_cache_config.tokens_per_block = 16;
  auto llm = llmrt::LLM::create(
      {.model = model,
       .kv_cache_config = kv_cache_config,
       .scheduler_config = {.context_chunking_policy = llmrt::ContextChunkingPolicy::kEqualProgress,
                            .enable_chunked_context = true},
       .max_num_tokens = 32});
  if (!llm.isOk()) return example::fail(llm.status());

  std::string story = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.";
  std::vector<llmrt::Prompt> prompts = {llmrt::Prompt::fromText(story + " One day"),
                                        llmrt::Prompt::fromText(story + " Her mom")};
  llmrt::SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 24;
  auto outputs = (*llm)->generate(prompts, {sp});
  if (!outputs.isOk()) return example::fail(outputs.status());
  for (const auto& o : *outputs) {
    if (!o.status.isOk()) return example::fail(o.status);
    example::print(o);
  }
  // The first steps computed a chunk of each prompt side by side.
  for (const auto& it : (*llm)->executor().getLatestIterationStats()) {
    if (it.num_context_tokens == 0) continue;
    std::printf("step %llu:", static_cast<unsigned long long>(it.iteration));
    for (const auto& e : it.scheduled)
      std::printf(" request %llu %s %d", static_cast<unsigned long long>(e.request_id),
                  e.is_context ? "context" : "generation", e.num_tokens);
    std::printf("\n");
  }
  return 0;
}
