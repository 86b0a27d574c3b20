// Shared pieces of llmrt-bench: engine flags, random prompts, a timed run
// that stamps every streamed token, statistics and the model's FLOP count.
// Uses only the public API (include/llmrt/).
#pragma once

#include <CLI/CLI.hpp>
#include <array>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "llmrt/llm.h"
#include "option_flags.h"

namespace llmrt::bench {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// Exit codes: 0 success, 1 runtime failure (model, engine, request), 2 usage error.
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// Prints "llmrt-bench: error: <message>" on stderr and returns `code`.
int fail(const std::string& message, int code = kExitFailure);

// Flags that shape the engine and the requests, shared by every mode: the option tables of
// llmrt/config_options.h (the same flags as `llmrt generate`), with the bench's defaults:
// block reuse off (benchmarks measure computation, not reuse) and greedy, seeded requests.
struct EngineFlags {
  cli::OptionFlags options;
  std::string log_level = "warning";
  uint32_t prompt_seed = 0;  // --prompt-seed: the random prompts' generator
};

EngineConfig benchEngineDefaults();
SamplingParams benchSamplingDefaults();

// Registers the engine and sampling flags on a subcommand.
void addEngineFlags(CLI::App* cmd, EngineFlags& f);

// The engine config and the requests' sampling parameters the flags ask for, checked
// (EngineConfig::validate / SamplingParams::validate); the message names the flag.
Result<EngineConfig> engineConfigFromFlags(const EngineFlags& f);
Result<SamplingParams> samplingFromFlags(const EngineFlags& f);

// A number as %g prints it (for messages).
std::string formatNumber(double v);

// "<flag> has value <v>; expected an integer in [lo, hi]" when v is outside, else nullopt.
std::optional<std::string> checkRange(const std::string& flag, int64_t v, int64_t lo, int64_t hi);

// The resolved engine config as JSON, keyed as the option table names its options.
json engineConfigJson(const EngineConfig& c);
json modelJson(const ModelConfig& m);

// `count` prompts of `len` random ids in [10, vocab - 10) from std::mt19937(seed).
std::vector<Prompt> randomPrompts(uint32_t seed, size_t count, int64_t len, int64_t vocab);

// `base` with ignore_eos and exactly `max_tokens` tokens.
SamplingParams benchSamplingParams(const SamplingParams& base, int max_tokens);

// One generate() call with every token time-stamped on arrival (the engine's
// loop thread calls the TokenCallback as each step's tokens are ready).
struct TimedRun {
  Clock::time_point start;  // just before generate()
  Clock::time_point end;    // generate() returned: every request has completed
  std::vector<std::vector<Clock::time_point>> token_times;  // [request][token]
  std::vector<Clock::time_point> submit_times;              // [request]; empty: all at `start`
  std::vector<RequestOutput> outputs;
  Clock::time_point submitted(size_t i) const { return submit_times.empty() ? start : submit_times[i]; }
};

// Runs the prompts; fails when the engine fails or any request does, or when a
// request produced another number of tokens than its `max_tokens`. With
// `progress_every_s` > 0, prints tokens and finished requests so far on stderr
// at that interval (a run cut short by a time limit still leaves a trace).
Result<TimedRun> runTimed(LLM& llm, const std::vector<Prompt>& prompts, const SamplingParams& sp,
                          double progress_every_s = 0.0);
// The same with one SamplingParams per prompt (each request checked against its own max_tokens).
Result<TimedRun> runTimed(LLM& llm, const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& sps,
                          double progress_every_s = 0.0);

// Requests submitted over time instead of at once (throughput --concurrency / --request-rate):
// at most `concurrency` in flight (0: no bound; then one thread per request, at most 4096),
// arrivals a Poisson process of `rate` requests/s from std::mt19937(seed) (0: each as soon as it
// may), each streamed on its own thread (generateAsync) with every token time-stamped as it
// arrives. Checks the outputs as runTimed does.
Result<TimedRun> runScheduled(LLM& llm, const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& sps,
                              int64_t concurrency, double rate, uint32_t seed);

double msBetween(Clock::time_point a, Clock::time_point b);

// Linear-interpolated percentile (numpy's default), p in [0, 100]; 0 for an empty set.
double percentile(std::vector<double> v, double p);
double mean(const std::vector<double>& v);
double minOf(const std::vector<double>& v);
double maxOf(const std::vector<double>& v);

// Floating-point operations of one prefill of `n` tokens (multiply-add = 2):
// every layer's linears on all n tokens, lm_head on the last token only, and
// causal attention (QK^T and PV over n(n+1)/2 pairs per head). Sliding windows
// are ignored (full causal attention is counted).
struct PrefillFlops {
  double linear = 0.0;
  double attention = 0.0;
  double total() const { return linear + attention; }
};
PrefillFlops prefillFlops(const ModelConfig& m, int64_t n);

// Parameters of every layer's linear projections (no embeddings, norms, lm_head).
double layerLinearParams(const ModelConfig& m);

// LlmStats as JSON, and the difference of two snapshots (after - before).
json statsJson(const LlmStats& s);
LlmStats statsDelta(const LlmStats& after, const LlmStats& before);

// Runs gnuplot on `script` (a PNG's plot); FailedPrecondition naming the data file when gnuplot is
// not installed (Debian: gnuplot-nox).
Status runGnuplot(const std::string& script, const std::string& data);

// throughput --plot: output tokens/s over the run (buckets of 1/50 of it, at least 10 ms) and the
// distribution (CDF) of the requests' TTFT and end-to-end latency, side by side, into `png`
// (the data beside it: PNG.rate.dat, PNG.latency.dat, PNG.gp).
Status plotThroughputRun(const TimedRun& run, const std::string& png);

// A concurrency sweep's chart (throughput --concurrency A,B,... and serve --plot): two latencies
// (`names`, e.g. median TTFT and ITL, ms) against output tokens/s, each point labelled with its
// concurrency, side by side, into `png` (data: PNG.dat, script: PNG.gp).
struct SweepPoint {
  int64_t concurrency = 0;
  double output_tokens_per_s = 0, latency[2] = {0, 0};
};
Status plotSweep(const std::vector<SweepPoint>& points, const std::array<std::string, 2>& names,
                 const std::string& png);

// Prints the mode's JSON line on stdout.
void printJsonLine(const json& j);

}  // namespace llmrt::bench
