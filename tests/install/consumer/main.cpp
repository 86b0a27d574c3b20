// Generates a few greedy tokens with the installed library: llmrt::LLM on a model directory.
#include <cstdio>

#include "llmrt/llm.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  llmrt::LlmArgs args;
  args.model = argv[1];
  args.backend = llmrt::BackendKind::kCpu;
  args.num_threads = 1;
  auto llm = llmrt::LLM::create(args);
  if (!llm.isOk()) {
    std::fprintf(stderr, "%s\n", llm.status().toString().c_str());
    return 1;
  }
  llmrt::SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 4;
  auto out = (*llm)->generate({llmrt::Prompt::fromText("This package provides")}, {p});
  if (!out.isOk() || !(*out)[0].status.isOk()) return 1;
  std::printf("%zu tokens: %s\n", (*out)[0].outputs[0].token_ids.size(), (*out)[0].outputs[0].text.c_str());
  return (*out)[0].outputs[0].token_ids.size() == 4 ? 0 : 1;
}
