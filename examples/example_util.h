// Shared by the examples: the model directory argument (skips with exit code
// 77 when it is absent, for CTest) and printing.
#pragma once

#include <cstdio>
#include <fstream>
#include <string>

#include "llmrt/llm.h"

namespace example {

constexpr int kSkip = 77;

// The model directory from argv[1]; empty when absent (the caller returns kSkip).
inline std::string modelDir(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "../shared/testdata/models/stories260K-hf";
  if (!std::ifstream(dir + "/config.json").good()) {
    std::fprintf(stderr, "model directory %s not found; skipping\n", dir.c_str());
    return {};
  }
  return dir;
}

inline int fail(const llmrt::Status& s) {
  std::fprintf(stderr, "error: %s\n", s.toString().c_str());
  return 1;
}

inline void print(const llmrt::RequestOutput& o) {
  std::printf("Prompt: %s, Generated text: %s [%s, %d cached prompt tokens]\n",
              o.prompt.empty() ? "(ids)" : o.prompt.c_str(), o.outputs.empty() ? "" : o.outputs[0].text.c_str(),
              o.outputs.empty() ? "error" : std::string(llmrt::toString(o.outputs[0].finish_reason)).c_str(),
              o.cached_tokens);
}

}  // namespace example
