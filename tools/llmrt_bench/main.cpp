// llmrt-bench: latency, prefill and throughput benchmarks of the LLM API on
// random prompts. Uses only the public API in include/llmrt/.
//
//   llmrt-bench latency    --model DIR --input-len 128 --output-len 128
//   llmrt-bench prefill    --model DIR --input-len 2048
//   llmrt-bench throughput --model DIR --num-requests 512 --input-len 128 --output-len 128
//   llmrt-bench serve      --base-url http://127.0.0.1:8000 --concurrency 1,8,64 --plot sweep.png
//
// Each prints a readable summary on stderr and one JSON line on stdout:
//   {"mode": ..., "config": {...}, "results": {...}}
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "bench_common.h"
#include "modes.h"
#include "serve_bench.h"

int main(int argc, char** argv) {
  using namespace llmrt::bench;
  CLI::App app{"llmrt-bench: latency, prefill and throughput benchmarks on random prompts or datasets"};
  app.require_subcommand(1);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version", "llmrt-bench 0.1.0");

  EngineFlags ef;
  LatencyFlags lf;
  PrefillFlags pf;
  ThroughputFlags tf;

  auto* lat = app.add_subcommand("latency", "Batch-1 streamed generation: TTFT and inter-token latency");
  addEngineFlags(lat, ef);
  lat->add_option("--input-len", lf.input_len, "Prompt tokens (default 128)");
  lat->add_option("--output-len", lf.output_len, "Generated tokens, >= 2 (default 128)");
  lat->add_option("--warmup", lf.warmup, "Unmeasured runs first (default 2)");
  lat->add_option("--iters", lf.iters, "Measured runs (default 5)");
  lat->add_flag("--cached-prefix", lf.cached_prefix,
                "Send one prompt every run: after the first its blocks are reused, so TTFT is that of a "
                "fully cached prefix (needs --warmup >= 1 and --enable-block-reuse)");

  auto* pre =
      app.add_subcommand("prefill", "Batch-1 prompt processing: time to first token, tokens/s, FLOP/s");
  addEngineFlags(pre, ef);
  pre->add_option("--input-len", pf.input_len, "Prompt tokens (default 2048)");
  pre->add_option("--warmup", pf.warmup, "Unmeasured runs first (default 1)");
  pre->add_option("--iters", pf.iters, "Measured runs (default 5)");

  auto* thr =
      app.add_subcommand("throughput", "All requests at once: tokens/s, requests/s, latency distributions");
  addEngineFlags(thr, ef);
  thr->add_option("--num-requests", tf.num_requests, "Requests submitted together (default 64)");
  thr->add_option("--input-len", tf.input_len, "Prompt tokens per request, the mean of --input-len-dist (default 128)");
  thr->add_option("--output-len", tf.output_len,
                  "Generated tokens per request, the mean of --output-len-dist; a dataset line without a length "
                  "(default 128)");
  thr->add_option("--input-len-dist", tf.input_dist, "Synthetic prompt lengths: fixed, uniform or normal (default fixed)")
      ->check(CLI::IsMember({"fixed", "uniform", "normal"}));
  thr->add_option("--output-len-dist", tf.output_dist, "Generated lengths: fixed, uniform or normal (default fixed)")
      ->check(CLI::IsMember({"fixed", "uniform", "normal"}));
  thr->add_option("--input-len-spread", tf.input_spread,
                  "Tokens: the half-width (uniform) or standard deviation (normal) of the prompt lengths (default 0)");
  thr->add_option("--output-len-spread", tf.output_spread,
                  "Tokens: the half-width (uniform) or standard deviation (normal) of the generated lengths (default 0)");
  thr->add_option("--dataset", tf.dataset,
                  "Requests from a file: JSONL of {\"prompt\": text} or {\"input_ids\": [...]} with \"output_tokens\" "
                  "(trtllm-bench's format), or a ShareGPT JSON array (default: synthetic)");
  thr->add_option("--concurrency", tf.concurrency,
                  "At most this many requests in flight, each streamed on its own thread (default 0: all at once); "
                  "a list (1,4,16) runs a sweep")
      ->delimiter(',');
  thr->add_option("--request-rate", tf.request_rate,
                  "Poisson arrivals at this many requests/s, seeded by --prompt-seed (default 0: no pacing)");
  thr->add_option("--plot", tf.plot,
                  "Also draw a PNG (gnuplot): output tokens/s over the run, TTFT and end-to-end distributions");
  thr->add_option("--csv", tf.csv, "Also write one CSV row per request (lengths, TTFT, mean ITL, end to end)");
  thr->add_option("--warmup", tf.warmup, "Short unmeasured requests run first (default 1)");
  thr->add_option("--progress-interval", tf.progress_s,
                  "Seconds between progress lines on stderr (0 = none, default 10)");

  ServeBenchFlags sf;
  auto* srv = app.add_subcommand("serve", "Load a running OpenAI-compatible server: TTFT, TPOT, ITL, E2E, throughput, goodput");
  addServeBenchFlags(srv, sf);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return llmrt::cli::reportParseError(app, e, "llmrt-bench");
  }
  try {
    if (lat->parsed()) return runLatency(ef, lf);
    if (pre->parsed()) return runPrefill(ef, pf);
    if (thr->parsed()) return runThroughput(ef, tf);
    if (srv->parsed()) return runServeBench(sf);
  } catch (const std::exception& e) {
    return fail(std::string("internal error: ") + e.what());
  }
  return kExitUsage;
}
