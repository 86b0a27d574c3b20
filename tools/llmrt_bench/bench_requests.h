// The requests of an offline throughput run (llmrt-bench throughput): synthetic random token ids
// with input / output lengths fixed or drawn from a uniform or normal distribution (as
// trtllm-bench's prepare_dataset makes them), or read from a dataset file: JSONL with one request
// per line ({"prompt": text} or {"input_ids": [...]}, and the tokens to generate as
// "output_tokens", "output_len" or "max_tokens"; trtllm-bench's dataset format), or a ShareGPT
// JSON array of conversations (the first human turn is the prompt, the first reply's token count
// the output length, as `vllm bench` uses it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llmrt/llm.h"

namespace llmrt::bench {

struct BenchRequest {
  Prompt prompt;
  int64_t input_len = 0;   // prompt tokens
  int64_t output_len = 0;  // tokens to generate (ignore_eos)
};

// How the synthetic lengths are drawn around their mean: fixed, uniform in [mean - spread, mean
// + spread], or normal with standard deviation `spread`; rounded, clamped to [1, 2 * mean].
struct LengthDist {
  std::string kind = "fixed";  // fixed | uniform | normal
  double spread = 0.0;
};

struct RequestsSpec {
  std::string dataset;  // "" = synthetic
  int64_t num_requests = 64;
  int64_t input_len = 128, output_len = 128;  // synthetic means; a dataset line without a length: output_len
  LengthDist input_dist, output_dist;
  uint32_t seed = 0;
};

// The requests `spec` asks for: at most num_requests (the first lines of a dataset). Requests
// longer than max_seq_len are dropped (counted in `dropped`). Errors name the file and line.
Result<std::vector<BenchRequest>> makeBenchRequests(const RequestsSpec& spec, const Tokenizer* tokenizer,
                                                    int64_t vocab, int64_t max_seq_len, int64_t* dropped);

}  // namespace llmrt::bench
