// Sizing the KV cache (TensorRT-LLM's free_gpu_memory_fraction / max_tokens):
// the primary pool takes a fraction of the memory left after the weights,
// capped at max_tokens. The sizing is logged at info level.
#include "example_util.h"
#include "llmrt/util.h"

int main(int argc, char** argv) {
  const std::string model = example::modelDir(argc, argv);
  if (model.empty()) return example::kSkip;
  (void)llmrt::setLogLevelByName("info");
  llmrt::KvCacheConfig kv_cache_config;
  kv_cache_config.free_gpu_memory_fraction = 0.5;
  kv_cache_config.max_tokens = 2048;
  auto llm = llmrt::LLM::create({.model = model, .kv_cache_config = kv_cache_config});
  if (!llm.isOk()) return example::fail(llm.status());
  (void)llmrt::setLogLevelByName("warning");

  llmrt::SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 16;
  auto outputs = (*llm)->generate({llmrt::Prompt::fromText("Once upon a time")}, {sp});
  if (!outputs.isOk()) return example::fail(outputs.status());
  example::print((*outputs)[0]);
  const llmrt::ExecutorStats st = (*llm)->executor().stats();
  std::printf("KV cache: %d blocks of %d tokens\n", st.kv_total_blocks, kv_cache_config.tokens_per_block);
  return st.kv_total_blocks * kv_cache_config.tokens_per_block <= 2048 ? 0 : 1;
}
