// llmrt-bench serve: load a running OpenAI-compatible server (llmrt serve, vLLM, trtllm-serve)
// the way `vllm bench serve` does, over streamed /v1/completions or /v1/chat/completions:
// a JSONL dataset or synthetic prompts (token ids, input/output lengths drawn around a mean),
// fixed concurrency or a Poisson request rate; reports TTFT, TPOT, ITL and E2E (mean, median,
// p90, p99), request and token throughput, goodput under SLOs, and errors. A list of
// concurrencies runs a sweep; --plot draws latency against throughput over it (gnuplot).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace llmrt::bench {

struct ServeBenchFlags {
  std::string base_url = "http://127.0.0.1:8000";
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions
  std::string model;                         // "" = the server's first model
  std::string api_key;
  std::string dataset;       // JSONL: {"prompt": ...} or {"messages": [...]}, optional "max_tokens"
  int64_t num_prompts = 200;
  int64_t input_len = 128;   // synthetic: mean prompt tokens
  int64_t output_len = 128;  // mean generated tokens (ignore_eos)
  double range_ratio = 0.0;  // synthetic lengths uniform in [len * (1 - r), len * (1 + r)]
  int64_t vocab_size = 1000;  // synthetic token ids are drawn from [10, vocab_size)
  std::vector<int64_t> concurrency = {16};  // several: a sweep
  double request_rate = 0.0;  // requests/s (Poisson); 0 = all at once, bounded by concurrency
  uint32_t seed = 0;
  double slo_ttft_ms = 0.0, slo_tpot_ms = 0.0, slo_e2e_ms = 0.0;  // goodput SLOs (0 = none)
  std::string json_out;
  std::string plot;  // PNG path
  int64_t warmup = 2;
  double timeout_s = 600.0;  // per request
};

void addServeBenchFlags(CLI::App* cmd, ServeBenchFlags& f);
int runServeBench(const ServeBenchFlags& f);

}  // namespace llmrt::bench
