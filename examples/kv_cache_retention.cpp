// KV cache retention (TensorRT-LLM's KvCacheRetentionConfig): the blocks of a
// shared 4-token system prompt get priority 100, so they outlive other cached
// blocks under pressure and later requests reuse them.
#include "example_util.h"

int main(int argc, char** argv) {
  const std::string model = example::modelDir(argc, argv);
  if (model.empty()) return example::kSkip;
  llmrt::KvCacheConfig kv_cache_config;
  kv_cache_config.tokens_per_block = 4;
  kv_cache_config.max_tokens = 64;  // 16 blocks: every request below evicts most of the cache
  auto llm = llmrt::LLM::create({.model = model, .kv_cache_config = kv_cache_config});
  if (!llm.isOk()) return example::fail(llm.status());

  // "<s> Once upon a" is the 4-token system prompt.
  const std::vector<llmrt::TokenId> system_prompt = {1, 403, 407, 261};
  llmrt::KvCacheRetentionConfig keep_system_prompt;
  keep_system_prompt.token_range_retention_configs.push_back(
      {.token_start = 0, .token_end = 4, .priority = 100, .duration_ms = std::nullopt});

  llmrt::SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 8;
  auto withSystem = [&](std::vector<llmrt::TokenId> rest) {
    std::vector<llmrt::TokenId> ids = system_prompt;
    ids.insert(ids.end(), rest.begin(), rest.end());
    return llmrt::Prompt::fromIds(ids);
  };
  auto first = (*llm)->generate({withSystem({378, 432})}, {sp}, {keep_system_prompt});
  if (!first.isOk()) return example::fail(first.status());
  example::print((*first)[0]);
  // Pressure: unrelated prompts that need most of the cache.
  for (int k = 0; k < 3; ++k) {
    std::vector<llmrt::TokenId> other = {1};
    for (int i = 0; i < 40; ++i) other.push_back(static_cast<llmrt::TokenId>(300 + (k * 37 + i * 11) % 200));
    auto o = (*llm)->generate({llmrt::Prompt::fromIds(other)}, {sp});
    if (!o.isOk()) return example::fail(o.status());
  }
  auto again = (*llm)->generate({withSystem({298, 315})}, {sp}, {keep_system_prompt});
  if (!again.isOk()) return example::fail(again.status());
  example::print((*again)[0]);
  const llmrt::LlmStats st = (*llm)->stats();
  std::printf("evicted blocks: %llu; the system prompt came from the cache: %s\n",
              static_cast<unsigned long long>(st.evicted_blocks), (*again)[0].cached_tokens >= 4 ? "yes" : "no");
  return (*again)[0].cached_tokens >= 4 ? 0 : 1;
}
