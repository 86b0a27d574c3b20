// The three benchmark modes of llmrt-bench. Each prints a readable summary on
// stderr and one JSON line {"mode", "config", "results"} on stdout, and returns
// the process exit code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.h"

namespace llmrt::bench {

struct LatencyFlags {
  int64_t input_len = 128;
  int64_t output_len = 128;
  int64_t warmup = 2;
  int64_t iters = 5;
  // Every run sends the same prompt, so from the second on its blocks are cached (block reuse):
  // TTFT is then that of a fully cached prefix.
  bool cached_prefix = false;
};

struct PrefillFlags {
  int64_t input_len = 2048;
  int64_t warmup = 1;
  int64_t iters = 5;
};

struct ThroughputFlags {
  int64_t num_requests = 64;
  int64_t input_len = 128;   // synthetic prompts: mean prompt tokens
  int64_t output_len = 128;  // mean generated tokens (a dataset line without a length: this)
  std::string input_dist = "fixed", output_dist = "fixed";  // fixed | uniform | normal
  double input_spread = 0.0, output_spread = 0.0;           // uniform: half-width; normal: stdev
  std::string dataset;       // JSONL ({"prompt"} / {"input_ids"}, "output_tokens") or ShareGPT JSON
  std::string csv;           // one row per request (lengths, TTFT, ITL, end to end)
  std::string plot;          // PNG: output tokens/s over time, TTFT / end-to-end distributions
  std::vector<int64_t> concurrency = {0};  // at most this many in flight (0: all at once); several: a sweep
  double request_rate = 0;   // Poisson arrivals, requests/s (0: all at once / as slots free)
  int64_t warmup = 1;        // short requests run before the measured batch
  double progress_s = 10.0;  // progress lines on stderr every this many seconds; 0 = none
};

// Batch 1, streamed: time to first token and inter-token latencies.
int runLatency(const EngineFlags& ef, const LatencyFlags& f);
// Batch 1, one generated token: prefill time, tokens/s and model FLOP/s.
int runPrefill(const EngineFlags& ef, const PrefillFlags& f);
// All requests submitted at once: tokens/s, requests/s, TTFT / ITL / end-to-end distributions.
int runThroughput(const EngineFlags& ef, const ThroughputFlags& f);

}  // namespace llmrt::bench
