#include "modes.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <variant>

#include "bench_requests.h"
#include "llmrt/util.h"

namespace llmrt::bench {
namespace {

constexpr int64_t kMaxLen = int64_t{1} << 24;

// A created engine and what every mode reports about it.
struct Engine {
  std::unique_ptr<LLM> llm;
  SamplingParams sampling;  // the requests' sampling parameters (lengths set per mode)
  double load_s = 0.0;
};

// Checks every flag, sets the log level and creates the engine. Returns the exit code on failure.
std::variant<Engine, int> openEngine(const EngineFlags& ef) {
  if (Status s = setLogLevelByName(ef.log_level); !s.isOk())
    return fail("--log-level: " + s.message(), kExitUsage);
  auto config = engineConfigFromFlags(ef);
  if (!config.isOk()) return fail(config.status().message(), kExitUsage);
  auto sampling = samplingFromFlags(ef);
  if (!sampling.isOk()) return fail(sampling.status().message(), kExitUsage);
  Engine eng;
  eng.sampling = *sampling;
  const auto t0 = Clock::now();
  auto llm = LLM::create(*config);
  if (!llm.isOk()) return fail(llm.status().message());
  eng.load_s = msBetween(t0, Clock::now()) / 1e3;
  eng.llm = std::move(*llm);
  const int64_t vocab = eng.llm->modelConfig().vocab_size;
  if (vocab < 21)
    return fail("the model's vocab_size is " + std::to_string(vocab) +
                "; random prompts need ids in [10, vocab - 10), so expected at least 21");
  return eng;
}

// Prompt + output must fit the sequence length the engine runs with.
std::optional<std::string> checkSeqLen(LLM& llm, int64_t in, int64_t out) {
  const int64_t limit = llm.executor().config().max_seq_len;
  if (in + out <= limit) return std::nullopt;
  return "--input-len " + std::to_string(in) + " + --output-len " + std::to_string(out) + " = " +
         std::to_string(in + out) + " exceeds the max sequence length " + std::to_string(limit) +
         " (--max-seq-len, or the model's max_position_embeddings)";
}

json header(const char* mode, const EngineFlags& ef, LLM& llm, const SamplingParams& sp, json mode_config) {
  json config = engineConfigJson(llm.executor().config());
  config["prompt_seed"] = ef.prompt_seed;
  for (const OptionInfo& o : samplingOptionTable()) {
    const std::string v = samplingOptionValue(sp, o.key);
    config["sampling"][std::string(o.key)] = v.empty() ? json(nullptr) : json(v);
  }
  for (auto& [k, v] : mode_config.items()) config[k] = v;
  config["model_config"] = modelJson(llm.modelConfig());
  return {{"mode", mode}, {"config", config}};
}

}  // namespace

int runLatency(const EngineFlags& ef, const LatencyFlags& f) {
  if (auto e = checkRange("--input-len", f.input_len, 1, kMaxLen)) return fail(*e, kExitUsage);
  if (auto e = checkRange("--output-len", f.output_len, 2, kMaxLen)) return fail(*e, kExitUsage);
  if (auto e = checkRange("--warmup", f.warmup, 0, 1000)) return fail(*e, kExitUsage);
  if (auto e = checkRange("--iters", f.iters, 1, 100000)) return fail(*e, kExitUsage);
  if (f.cached_prefix && f.warmup < 1)
    return fail("--cached-prefix needs --warmup >= 1 (the run that caches the prompt)", kExitUsage);
  auto opened = openEngine(ef);
  if (auto* code = std::get_if<int>(&opened)) return *code;
  Engine& eng = std::get<Engine>(opened);
  LLM& llm = *eng.llm;
  if (f.cached_prefix && !llm.executor().config().kv_cache_config.enable_block_reuse)
    return fail(
        "--cached-prefix needs block reuse, which llmrt-bench turns off by default: add --enable-block-reuse",
        kExitUsage);
  const ModelConfig& m = llm.modelConfig();
  if (auto e = checkSeqLen(llm, f.input_len, f.output_len)) return fail(*e, kExitUsage);

  const auto prompts =
      randomPrompts(ef.prompt_seed, static_cast<size_t>(f.warmup + f.iters), f.input_len, m.vocab_size);
  const SamplingParams sp = benchSamplingParams(eng.sampling, static_cast<int>(f.output_len));
  std::vector<double> ttft, itl, e2e, per_iter_decode;
  LlmStats before = llm.stats();
  for (int64_t it = 0; it < f.warmup + f.iters; ++it) {
    if (it == f.warmup) before = llm.stats();
    auto run = runTimed(llm, {prompts[f.cached_prefix ? 0 : static_cast<size_t>(it)]}, sp);
    if (!run.isOk()) return fail(run.status().message());
    if (it < f.warmup) continue;
    const auto& times = run->token_times[0];
    ttft.push_back(msBetween(run->start, times.front()));
    e2e.push_back(msBetween(run->start, times.back()));
    std::vector<double> gaps;
    for (size_t t = 1; t < times.size(); ++t) gaps.push_back(msBetween(times[t - 1], times[t]));
    per_iter_decode.push_back(mean(gaps));
    itl.insert(itl.end(), gaps.begin(), gaps.end());
  }
  const LlmStats st = statsDelta(llm.stats(), before);

  const double ms_per_token = mean(itl);
  json j = header("latency", ef, llm, sp,
                  {{"input_len", f.input_len},
                   {"output_len", f.output_len},
                   {"warmup", f.warmup},
                   {"iters", f.iters},
                   {"cached_prefix", f.cached_prefix},
                   {"batch_size", 1}});
  j["results"] = {{"load_s", eng.load_s},
                  {"ttft_ms_mean", mean(ttft)},
                  {"ttft_ms_p50", percentile(ttft, 50)},
                  {"ttft_ms_min", minOf(ttft)},
                  {"ttft_over_itl", ms_per_token > 0 ? mean(ttft) / ms_per_token : 0.0},
                  {"decode_ms_per_token", ms_per_token},
                  {"decode_tokens_per_s", ms_per_token > 0 ? 1000.0 / ms_per_token : 0.0},
                  {"itl_ms_p50", percentile(itl, 50)},
                  {"itl_ms_p90", percentile(itl, 90)},
                  {"itl_ms_p99", percentile(itl, 99)},
                  {"itl_ms_max", maxOf(itl)},
                  {"e2e_ms_mean", mean(e2e)},
                  {"iter_ttft_ms", ttft},
                  {"iter_decode_ms_per_token", per_iter_decode},
                  {"engine_stats", statsJson(st)}};
  std::fprintf(stderr,
               "latency: %s, batch 1, input %lld, output %lld, %lld iters after %lld warmup (load %.1f s)\n"
               "  TTFT            mean %8.2f ms   p50 %8.2f ms   min %8.2f ms\n"
               "  decode          %8.3f ms/token = %.1f tok/s\n"
               "  ITL             p50 %8.3f ms   p90 %8.3f ms   p99 %8.3f ms   max %8.3f ms\n"
               "  end to end      mean %8.1f ms   (%llu steps)\n",
               llm.executor().config().model.c_str(), static_cast<long long>(f.input_len), static_cast<long long>(f.output_len),
               static_cast<long long>(f.iters), static_cast<long long>(f.warmup), eng.load_s, mean(ttft),
               percentile(ttft, 50), minOf(ttft), ms_per_token,
               ms_per_token > 0 ? 1000.0 / ms_per_token : 0.0, percentile(itl, 50), percentile(itl, 90),
               percentile(itl, 99), maxOf(itl), mean(e2e), static_cast<unsigned long long>(st.steps));
  printJsonLine(j);
  return 0;
}

int runPrefill(const EngineFlags& ef, const PrefillFlags& f) {
  if (auto e = checkRange("--input-len", f.input_len, 1, kMaxLen)) return fail(*e, kExitUsage);
  if (auto e = checkRange("--warmup", f.warmup, 0, 1000)) return fail(*e, kExitUsage);
  if (auto e = checkRange("--iters", f.iters, 1, 100000)) return fail(*e, kExitUsage);
  auto opened = openEngine(ef);
  if (auto* code = std::get_if<int>(&opened)) return *code;
  Engine& eng = std::get<Engine>(opened);
  LLM& llm = *eng.llm;
  const ModelConfig& m = llm.modelConfig();
  if (auto e = checkSeqLen(llm, f.input_len, 1)) return fail(*e, kExitUsage);

  const auto prompts =
      randomPrompts(ef.prompt_seed, static_cast<size_t>(f.warmup + f.iters), f.input_len, m.vocab_size);
  const SamplingParams sp = benchSamplingParams(eng.sampling, 1);
  std::vector<double> ttft;
  LlmStats before = llm.stats();
  for (int64_t it = 0; it < f.warmup + f.iters; ++it) {
    if (it == f.warmup) before = llm.stats();
    auto run = runTimed(llm, {prompts[static_cast<size_t>(it)]}, sp);
    if (!run.isOk()) return fail(run.status().message());
    if (it >= f.warmup) ttft.push_back(msBetween(run->start, run->token_times[0].front()));
  }
  const LlmStats st = statsDelta(llm.stats(), before);
  const PrefillFlops flops = prefillFlops(m, f.input_len);
  const double n = static_cast<double>(f.input_len);
  const double mean_ms = mean(ttft), min_ms = minOf(ttft);
  json j = header("prefill", ef, llm, sp,
                  {{"input_len", f.input_len},
                   {"output_len", 1},
                   {"warmup", f.warmup},
                   {"iters", f.iters},
                   {"batch_size", 1}});
  j["results"] = {{"load_s", eng.load_s},
                  {"prefill_ms_mean", mean_ms},
                  {"prefill_ms_min", min_ms},
                  {"prefill_ms_p50", percentile(ttft, 50)},
                  {"prefill_tokens_per_s", n / mean_ms * 1e3},
                  {"prefill_tokens_per_s_best", n / min_ms * 1e3},
                  {"linear_flops", flops.linear},
                  {"attention_flops", flops.attention},
                  {"model_flops", flops.total()},
                  {"model_tflops_per_s", flops.total() / (mean_ms * 1e-3) / 1e12},
                  {"model_tflops_per_s_best", flops.total() / (min_ms * 1e-3) / 1e12},
                  {"iter_prefill_ms", ttft},
                  {"engine_stats", statsJson(st)}};
  std::fprintf(stderr,
               "prefill: %s, batch 1, input %lld, %lld iters after %lld warmup (load %.1f s)\n"
               "  prefill (TTFT)  mean %8.2f ms   min %8.2f ms\n"
               "  tokens/s        mean %10.1f     best %10.1f\n"
               "  model FLOPs     %.4g (linear %.4g + attention %.4g)\n"
               "  model TFLOP/s   mean %8.2f       best %8.2f   (%llu steps)\n",
               llm.executor().config().model.c_str(), static_cast<long long>(f.input_len), static_cast<long long>(f.iters),
               static_cast<long long>(f.warmup), eng.load_s, mean_ms, min_ms, n / mean_ms * 1e3,
               n / min_ms * 1e3, flops.total(), flops.linear, flops.attention,
               flops.total() / (mean_ms * 1e-3) / 1e12, flops.total() / (min_ms * 1e-3) / 1e12,
               static_cast<unsigned long long>(st.steps));
  printJsonLine(j);
  return 0;
}

int runThroughput(const EngineFlags& ef, const ThroughputFlags& f) {
  if (auto e = checkRange("--num-requests", f.num_requests, 1, 1 << 20)) return fail(*e, kExitUsage);
  if (auto e = checkRange("--input-len", f.input_len, 1, kMaxLen)) return fail(*e, kExitUsage);
  if (auto e = checkRange("--output-len", f.output_len, 1, kMaxLen)) return fail(*e, kExitUsage);
  if (auto e = checkRange("--warmup", f.warmup, 0, 1000)) return fail(*e, kExitUsage);
  if (!(f.progress_s >= 0.0 && f.progress_s <= 86400.0))
    return fail("--progress-interval has value " + formatNumber(f.progress_s) +
                    "; expected a number of seconds in [0, 86400]",
                kExitUsage);
  if (f.concurrency.empty()) return fail("--concurrency: no value", kExitUsage);
  for (const int64_t c : f.concurrency)
    if (auto e = checkRange("--concurrency", c, 0, 4096)) return fail(*e, kExitUsage);
  if (!(f.request_rate >= 0.0 && f.request_rate <= 1e6))
    return fail("--request-rate has value " + formatNumber(f.request_rate) + "; expected requests/s in [0, 1e6]",
                kExitUsage);
  for (const auto& [flag, v] : {std::pair{"--input-len-spread", f.input_spread}, std::pair{"--output-len-spread", f.output_spread}})
    if (!(v >= 0.0 && v <= 1e7))
      return fail(std::string(flag) + " has value " + formatNumber(v) + "; expected a number of tokens in [0, 1e7]",
                  kExitUsage);
  auto opened = openEngine(ef);
  if (auto* code = std::get_if<int>(&opened)) return *code;
  Engine& eng = std::get<Engine>(opened);
  LLM& llm = *eng.llm;
  const ModelConfig& m = llm.modelConfig();
  const int64_t max_seq_len = llm.executor().config().max_seq_len;
  if (f.dataset.empty() && f.input_dist == "fixed" && f.output_dist == "fixed")
    if (auto e = checkSeqLen(llm, f.input_len, f.output_len)) return fail(*e, kExitUsage);
  RequestsSpec spec;
  spec.dataset = f.dataset;
  spec.num_requests = f.num_requests;
  spec.input_len = f.input_len;
  spec.output_len = f.output_len;
  spec.input_dist = {f.input_dist, f.input_spread};
  spec.output_dist = {f.output_dist, f.output_spread};
  spec.seed = ef.prompt_seed;
  int64_t dropped = 0;
  auto requests = makeBenchRequests(spec, llm.tokenizer(), m.vocab_size, max_seq_len, &dropped);
  if (!requests.isOk()) return fail(requests.status().message(), kExitUsage);
  if (dropped > 0)
    std::fprintf(stderr, "llmrt-bench: %lld requests longer than the max sequence length %lld were left out\n",
                 static_cast<long long>(dropped), static_cast<long long>(max_seq_len));

  // Warm-up: `warmup` short requests (the mean prompt length, 4 tokens) in one batch.
  if (f.warmup > 0) {
    const auto warm = randomPrompts(ef.prompt_seed + 1000003u, static_cast<size_t>(f.warmup),
                                    std::min<int64_t>(f.input_len, max_seq_len - 4), m.vocab_size);
    auto run = runTimed(llm, warm, benchSamplingParams(eng.sampling, static_cast<int>(std::min<int64_t>(4, f.output_len))));
    if (!run.isOk()) return fail("warm-up: " + run.status().message());
  }
  std::vector<Prompt> prompts;
  std::vector<SamplingParams> sps;
  for (const BenchRequest& r : *requests) {
    prompts.push_back(r.prompt);
    sps.push_back(benchSamplingParams(eng.sampling, static_cast<int>(r.output_len)));
  }
  const SamplingParams& sp = sps.front();
  const auto num_requests = static_cast<int64_t>(prompts.size());
  std::vector<json> levels;
  std::string csv_rows = "concurrency,request,input_tokens,output_tokens,ttft_ms,itl_ms_mean,e2e_ms\n";
  for (const int64_t concurrency : f.concurrency) {
    const LlmStats before = llm.stats();
    const bool scheduled = concurrency > 0 || f.request_rate > 0;
    auto run = scheduled ? runScheduled(llm, prompts, sps, concurrency, f.request_rate, ef.prompt_seed + 7u)
                         : runTimed(llm, prompts, sps, f.progress_s);
    if (!run.isOk())
      return fail(run.status().message(),
                  run.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure);
    const LlmStats st = statsDelta(llm.stats(), before);
    std::vector<double> ttft, itl, e2e;
    uint64_t out_tokens = 0, in_tokens = 0;
    for (size_t i = 0; i < run->outputs.size(); ++i) {
      const auto& times = run->token_times[i];
      const size_t n_out = run->outputs[i].outputs[0].token_ids.size(), n_in = run->outputs[i].prompt_token_ids.size();
      out_tokens += n_out;
      in_tokens += n_in;
      const double first = msBetween(run->submitted(i), times.front()), last = msBetween(run->submitted(i), times.back());
      ttft.push_back(first);
      e2e.push_back(last);
      for (size_t t = 1; t < times.size(); ++t) itl.push_back(msBetween(times[t - 1], times[t]));
      char row[192];  // --csv: one row per request, its lengths and latencies (ms)
      std::snprintf(row, sizeof(row), "%lld,%zu,%zu,%zu,%.3f,%.4f,%.3f\n", static_cast<long long>(concurrency), i,
                    n_in, n_out, first, times.size() > 1 ? (last - first) / static_cast<double>(times.size() - 1) : 0.0,
                    last);
      csv_rows += row;
    }
    const double wall_s = msBetween(run->start, run->end) / 1e3;
    const double out_tps = static_cast<double>(out_tokens) / wall_s;
    const double total_tps = static_cast<double>(out_tokens + in_tokens) / wall_s;
    const double rps = static_cast<double>(num_requests) / wall_s;
    levels.push_back({{"load_s", eng.load_s},
                      {"concurrency", concurrency},
                      {"wall_s", wall_s},
                      {"num_requests", num_requests},
                      {"requests_left_out", dropped},
                      {"input_tokens", in_tokens},
                      {"output_tokens", out_tokens},
                      {"output_tokens_per_s", out_tps},
                      {"total_tokens_per_s", total_tps},
                      {"requests_per_s", rps},
                      {"ttft_ms_mean", mean(ttft)},
                      {"ttft_ms_p50", percentile(ttft, 50)},
                      {"ttft_ms_p99", percentile(ttft, 99)},
                      {"itl_ms_mean", mean(itl)},
                      {"itl_ms_p50", percentile(itl, 50)},
                      {"itl_ms_p99", percentile(itl, 99)},
                      {"e2e_ms_mean", mean(e2e)},
                      {"e2e_ms_p99", percentile(e2e, 99)},
                      {"engine_stats", statsJson(st)}});
    std::fprintf(
        stderr,
        "throughput: %s, %lld requests (input %.1f, output %.1f tokens on average), %s, max batch %d, max "
        "tokens/step %lld (load %.1f s)\n"
        "  wall            %10.3f s\n"
        "  output tokens   %10llu   %10.1f tok/s\n"
        "  total tokens    %10llu   %10.1f tok/s\n"
        "  requests/s      %10.2f\n"
        "  TTFT            mean %9.1f ms   p50 %9.1f ms   p99 %9.1f ms\n"
        "  ITL             mean %9.2f ms   p50 %9.2f ms   p99 %9.2f ms\n"
        "  end to end      mean %9.1f ms   p99 %9.1f ms\n"
        "  engine          %llu steps, %.1f generated tokens/step, %llu context tokens, busy %.2f s "
        "(GPU %.2f s), %llu pauses\n",
        llm.executor().config().model.c_str(), static_cast<long long>(num_requests),
        static_cast<double>(in_tokens) / static_cast<double>(num_requests),
        static_cast<double>(out_tokens) / static_cast<double>(num_requests),
        concurrency > 0 ? ("concurrency " + std::to_string(concurrency)).c_str() : "all at once",
        llm.executor().config().max_batch_size, static_cast<long long>(llm.executor().config().max_num_tokens),
        eng.load_s, wall_s, static_cast<unsigned long long>(out_tokens), out_tps,
        static_cast<unsigned long long>(out_tokens + in_tokens), total_tps, rps, mean(ttft), percentile(ttft, 50),
        percentile(ttft, 99), mean(itl), percentile(itl, 50), percentile(itl, 99), mean(e2e), percentile(e2e, 99),
        static_cast<unsigned long long>(st.steps),
        st.steps ? static_cast<double>(st.generated_tokens) / static_cast<double>(st.steps) : 0.0,
        static_cast<unsigned long long>(st.context_tokens), st.seconds, st.device_seconds,
        static_cast<unsigned long long>(st.pauses));
    if (!f.plot.empty() && f.concurrency.size() == 1)
      if (Status s = plotThroughputRun(*run, f.plot); !s.isOk()) return fail(s.message());
  }
  const bool sweep = levels.size() > 1;
  json j = header("throughput", ef, llm, sp,
                  {{"num_requests", f.num_requests},
                   {"input_len", f.input_len},
                   {"output_len", f.output_len},
                   {"input_len_dist", f.input_dist},
                   {"output_len_dist", f.output_dist},
                   {"input_len_spread", f.input_spread},
                   {"output_len_spread", f.output_spread},
                   {"dataset", f.dataset},
                   {"concurrency", sweep ? json(f.concurrency) : json(f.concurrency.front())},
                   {"request_rate", f.request_rate},
                   {"warmup", f.warmup}});
  j["results"] = sweep ? json(levels) : levels.front();
  if (!f.csv.empty()) {
    std::ofstream out(f.csv, std::ios::binary | std::ios::trunc);
    out << csv_rows;
    out.flush();
    if (!out) return fail("--csv: cannot write " + f.csv);
  }
  if (!f.plot.empty() && sweep) {
    std::vector<SweepPoint> points;
    for (const json& r : levels)
      points.push_back({r["concurrency"].get<int64_t>(), r["output_tokens_per_s"].get<double>(),
                        {r["ttft_ms_p50"].get<double>(), r["itl_ms_p50"].get<double>()}});
    if (Status s = plotSweep(points, {"TTFT", "ITL"}, f.plot); !s.isOk()) return fail(s.message());
  }
  printJsonLine(j);
  return 0;
}

}  // namespace llmrt::bench
