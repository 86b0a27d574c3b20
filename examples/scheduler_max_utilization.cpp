// Capacity scheduler policy MAX_UTILIZATION: pack as many requests as the KV
// cache holds for the next step, pausing (and later resuming) the most
// recently started ones when blocks run out. A deliberately small KV cache
// shows the pauses; the outputs are the same as without pressure.
#include "example_util.h"

int main(int argc, char** argv) {
  const std::string model = example::modelDir(argc, argv);
  if (model.empty()) return example::kSkip;
  llmrt::KvCacheConfig kv_cache_config;
  kv_cache_config.tokens_per_block = 16;
  kv_cache_config.max_tokens = 160;  // 10 blocks for 8 requests of up to 4 blocks each
  auto llm = llmrt::LLM::create(
      {.model = model,
       .kv_cache_config = kv_cache_config,
       .scheduler_config = {.capacity_scheduler_policy = llmrt::CapacitySchedulerPolicy::kMaxUtilization}});
  if (!llm.isOk()) return example::fail(llm.status());

  std::vector<llmrt::Prompt> prompts;
  for (const char* p : {"Once upon a time", "The dog", "Lily wanted", "Tom and Sue", "One day, a bird",
                        "The sun was", "A little cat", "Mom said"})
    prompts.push_back(llmrt::Prompt::fromText(p));
  llmrt::SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 40;
  auto outputs = (*llm)->generate(prompts, {sp});
  if (!outputs.isOk()) return example::fail(outputs.status());
  for (const auto& o : *outputs) {
    if (!o.status.isOk()) return example::fail(o.status);
    example::print(o);
  }
  const llmrt::LlmStats st = (*llm)->stats();
  std::printf("steps: %llu, pauses: %llu, resumes: %llu\n", static_cast<unsigned long long>(st.steps),
              static_cast<unsigned long long>(st.pauses), static_cast<unsigned long long>(st.resumes));
  return st.pauses == st.resumes ? 0 : 1;
}
