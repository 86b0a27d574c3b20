// Quickstart (TensorRT-LLM examples/llm-api/quickstart_example.py): load a
// model, sample a few prompts, print the outputs.
#include "example_util.h"

int main(int argc, char** argv) {
  const std::string model = example::modelDir(argc, argv);
  if (model.empty()) return example::kSkip;
  auto llm = llmrt::LLM::create({.model = model});
  if (!llm.isOk()) return example::fail(llm.status());

  std::vector<llmrt::Prompt> prompts = {llmrt::Prompt::fromText("Hello, my name is"),
                                        llmrt::Prompt::fromText("The capital of France is"),
                                        llmrt::Prompt::fromText("The future of AI is")};
  llmrt::SamplingParams sampling_params;
  sampling_params.temperature = 0.8f;
  sampling_params.top_p = 0.95f;
  sampling_params.seed = 0;

  auto outputs = (*llm)->generate(prompts, {sampling_params});
  if (!outputs.isOk()) return example::fail(outputs.status());
  for (const auto& o : *outputs) {
    if (!o.status.isOk()) return example::fail(o.status);
    example::print(o);
  }
  return 0;
}
