#include "bench_common.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

namespace llmrt::bench {

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "llmrt-bench: error: %s\n", message.c_str());
  return code;
}

EngineConfig benchEngineDefaults() {
  EngineConfig c;
  c.kv_cache_config.enable_block_reuse = false;
  return c;
}

SamplingParams benchSamplingDefaults() {
  SamplingParams p;
  p.temperature = 0.0f;
  p.seed = 0;
  return p;
}

void addEngineFlags(CLI::App* cmd, EngineFlags& f) {
  f.options.addEngineOptions(cmd, benchEngineDefaults());
  cmd->get_option("--model")->required();
  // The modes set the lengths and stops of every request themselves.
  f.options.addSamplingOptions(cmd, benchSamplingDefaults(),
                               {"max_tokens", "min_tokens", "n", "stop", "stop_token_ids", "ignore_eos", "logprobs",
                                "skip_special_tokens", "include_stop_str_in_output"});
  cmd->add_option("--prompt-seed", f.prompt_seed, "Seed of the random prompts (default 0)");
  cmd->add_option("--log-level", f.log_level, "trace | debug | info | warning | error | off (default warning)");
}

Result<EngineConfig> engineConfigFromFlags(const EngineFlags& f) {
  EngineConfig c = benchEngineDefaults();
  LLMRT_RETURN_IF_ERROR(f.options.applyEngine(c));
  LLMRT_RETURN_IF_ERROR(c.validate());
  return c;
}

Result<SamplingParams> samplingFromFlags(const EngineFlags& f) {
  SamplingParams p = benchSamplingDefaults();
  LLMRT_RETURN_IF_ERROR(f.options.applySampling(p));
  LLMRT_RETURN_IF_ERROR(p.validate());
  return p;
}

std::string formatNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::optional<std::string> checkRange(const std::string& flag, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return std::nullopt;
  return flag + " has value " + std::to_string(v) + "; expected an integer in [" + std::to_string(lo) + ", " +
         std::to_string(hi) + "]";
}

json engineConfigJson(const EngineConfig& c) {
  json j = json::object();
  for (const OptionInfo& o : engineOptionTable()) {
    const std::string v = engineOptionValue(c, o.key);
    j[std::string(o.key)] = v.empty() ? json(nullptr) : json(v);
  }
  return j;
}

double layerLinearParams(const ModelConfig& m) {
  const double h = static_cast<double>(m.hidden_size);
  const double q = static_cast<double>(m.qSize());
  const double kv = static_cast<double>(m.kvSize());
  const double i = static_cast<double>(m.intermediate_size);
  // q, k, v, o and the gated MLP's gate, up, down.
  return static_cast<double>(m.num_hidden_layers) * (h * (q + 2 * kv) + q * h + 3 * h * i);
}

json modelJson(const ModelConfig& m) {
  const double embed = static_cast<double>(m.vocab_size) * static_cast<double>(m.hidden_size);
  const double params = layerLinearParams(m) + embed * (m.tie_word_embeddings ? 1 : 2);
  return {{"architecture", m.architecture},
          {"vocab_size", m.vocab_size},
          {"hidden_size", m.hidden_size},
          {"intermediate_size", m.intermediate_size},
          {"num_hidden_layers", m.num_hidden_layers},
          {"num_attention_heads", m.num_attention_heads},
          {"num_key_value_heads", m.num_key_value_heads},
          {"head_dim", m.head_dim},
          {"max_position_embeddings", m.max_position_embeddings},
          {"tie_word_embeddings", m.tie_word_embeddings},
          {"approx_params", params}};
}

std::vector<Prompt> randomPrompts(uint32_t seed, size_t count, int64_t len, int64_t vocab) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<TokenId> dist(10, static_cast<TokenId>(vocab - 11));
  std::vector<Prompt> prompts;
  prompts.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    std::vector<TokenId> ids(static_cast<size_t>(len));
    for (TokenId& t : ids) t = dist(rng);
    prompts.push_back(Prompt::fromIds(std::move(ids)));
  }
  return prompts;
}

SamplingParams benchSamplingParams(const SamplingParams& base, int max_tokens) {
  SamplingParams sp = base;
  sp.max_tokens = max_tokens;
  sp.min_tokens = 0;
  sp.ignore_eos = true;
  return sp;
}

namespace {
// Every request succeeded, produced its max_tokens (ignore_eos) and streamed each of them.
template <typename SpOf>
Status checkOutputs(const TimedRun& run, SpOf spOf) {
  for (size_t i = 0; i < run.outputs.size(); ++i) {
    const RequestOutput& o = run.outputs[i];
    if (!o.status.isOk())
      return Status(o.status.code(), "request " + std::to_string(i) + ": " + o.status.message());
    const size_t got = o.outputs.empty() ? 0 : o.outputs[0].token_ids.size();
    if (got != static_cast<size_t>(spOf(i).max_tokens))
      return internalError("request " + std::to_string(i) + " generated " + std::to_string(got) +
                           " tokens; expected " + std::to_string(spOf(i).max_tokens) + " (ignore_eos is set)");
    if (run.token_times[i].size() != got)
      return internalError("request " + std::to_string(i) + " streamed " +
                           std::to_string(run.token_times[i].size()) + " tokens but returned " +
                           std::to_string(got));
  }
  return Status::ok();
}
}  // namespace

Result<TimedRun> runTimed(LLM& llm, const std::vector<Prompt>& prompts, const SamplingParams& sp,
                          double progress_every_s) {
  return runTimed(llm, prompts, std::vector<SamplingParams>{sp}, progress_every_s);
}

Result<TimedRun> runTimed(LLM& llm, const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& sps,
                          double progress_every_s) {
  auto spOf = [&](size_t i) -> const SamplingParams& { return sps.size() == 1 ? sps[0] : sps[i]; };
  TimedRun run;
  run.token_times.resize(prompts.size());
  // Reserved up front: the callback runs on the engine's loop thread and should not allocate.
  uint64_t want = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    run.token_times[i].reserve(static_cast<size_t>(spOf(i).max_tokens) + 1);
    want += static_cast<uint64_t>(spOf(i).max_tokens);
  }
  std::atomic<uint64_t> tokens{0}, finished{0};
  auto* times = &run.token_times;
  TokenCallback cb = [times, &tokens, &finished](size_t request, int completion, TokenId, const std::string&,
                                                 FinishReason finish) {
    const Clock::time_point now = Clock::now();
    if (completion != 0) return;
    (*times)[request].push_back(now);
    tokens.fetch_add(1, std::memory_order_relaxed);
    if (finish != FinishReason::kNone) finished.fetch_add(1, std::memory_order_relaxed);
  };
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread progress;
  run.start = Clock::now();
  if (progress_every_s > 0) {
    progress = std::thread([&] {
      std::unique_lock<std::mutex> lock(mu);
      while (!cv.wait_for(lock, std::chrono::duration<double>(progress_every_s), [&] { return done; })) {
        std::fprintf(stderr, "  [%.0f s] %llu / %llu tokens, %llu / %zu requests finished\n",
                     msBetween(run.start, Clock::now()) / 1e3,
                     static_cast<unsigned long long>(tokens.load(std::memory_order_relaxed)),
                     static_cast<unsigned long long>(want),
                     static_cast<unsigned long long>(finished.load(std::memory_order_relaxed)),
                     prompts.size());
      }
    });
  }
  auto outs = llm.generate(prompts, sps, {}, cb);
  run.end = Clock::now();
  if (progress.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
    }
    cv.notify_all();
    progress.join();
  }
  if (!outs.isOk()) return outs.status();
  run.outputs = std::move(*outs);
  LLMRT_RETURN_IF_ERROR(checkOutputs(run, spOf));
  return run;
}

Result<TimedRun> runScheduled(LLM& llm, const std::vector<Prompt>& prompts, const std::vector<SamplingParams>& sps,
                              int64_t concurrency, double rate, uint32_t seed) {
  auto spOf = [&](size_t i) -> const SamplingParams& { return sps.size() == 1 ? sps[0] : sps[i]; };
  const size_t n = prompts.size();
  const size_t workers = concurrency > 0 ? std::min(static_cast<size_t>(concurrency), n) : n;
  if (workers > 4096)
    return invalidArgument(std::to_string(workers) + " requests in flight would take as many threads; bound them "
                           "with --concurrency (at most 4096)");
  // Arrival offsets (s): exponential gaps of mean 1 / rate.
  std::vector<double> arrival(n, 0.0);
  if (rate > 0) {
    std::mt19937 rng(seed);
    std::exponential_distribution<double> gap(rate);
    double t = 0.0;
    for (double& a : arrival) a = (t += gap(rng));
  }
  TimedRun run;
  run.token_times.resize(n);
  run.submit_times.resize(n);
  run.outputs.resize(n);
  std::vector<Status> errors(n);
  std::atomic<size_t> next{0};
  run.start = Clock::now();
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      std::this_thread::sleep_until(run.start + std::chrono::duration_cast<Clock::duration>(
                                                    std::chrono::duration<double>(arrival[i])));
      run.token_times[i].reserve(static_cast<size_t>(spOf(i).max_tokens) + 1);
      run.submit_times[i] = Clock::now();
      auto h = llm.generateAsync(prompts[i], spOf(i));
      if (!h.isOk()) {
        errors[i] = h.status();
        continue;
      }
      StreamDelta d;
      while ((*h)->next(d)) {
        const Clock::time_point now = Clock::now();
        if (d.completion == 0)
          for (size_t t = 0; t < d.token_ids.size(); ++t) run.token_times[i].push_back(now);
      }
      run.outputs[i] = (*h)->result();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(workers);
  for (size_t w = 0; w < workers; ++w) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  run.end = Clock::now();
  for (size_t i = 0; i < n; ++i)
    if (!errors[i].isOk()) return Status(errors[i].code(), "request " + std::to_string(i) + ": " + errors[i].message());
  LLMRT_RETURN_IF_ERROR(checkOutputs(run, spOf));
  return run;
}

Status runGnuplot(const std::string& script, const std::string& data) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    return failedPrecondition("--plot needs gnuplot (Debian: apt-get install gnuplot-nox); the data is in " + data);
  const std::string cmd = "gnuplot '" + script + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) return internalError("gnuplot failed on " + script);
  return Status::ok();
}

Status plotThroughputRun(const TimedRun& run, const std::string& png) {
  const double wall_s = msBetween(run.start, run.end) / 1e3;
  const double bucket = std::max(0.01, wall_s / 50);
  std::vector<double> tokens(static_cast<size_t>(wall_s / bucket) + 1, 0.0);
  std::vector<double> ttft, e2e;
  for (size_t i = 0; i < run.token_times.size(); ++i) {
    const auto& times = run.token_times[i];
    for (const Clock::time_point& t : times) {
      const auto b = static_cast<size_t>(msBetween(run.start, t) / 1e3 / bucket);
      tokens[std::min(b, tokens.size() - 1)] += 1.0;
    }
    if (times.empty()) continue;
    ttft.push_back(msBetween(run.submitted(i), times.front()));
    e2e.push_back(msBetween(run.submitted(i), times.back()));
  }
  std::sort(ttft.begin(), ttft.end());
  std::sort(e2e.begin(), e2e.end());
  const std::string rate = png + ".rate.dat", latency = png + ".latency.dat", script = png + ".gp";
  {
    std::ofstream d(rate);
    d << "# time_s output_tokens_per_s\n";
    for (size_t b = 0; b < tokens.size(); ++b) d << (static_cast<double>(b) + 0.5) * bucket << ' ' << tokens[b] / bucket << '\n';
    std::ofstream l(latency);
    l << "# fraction_of_requests ttft_ms e2e_ms (each sorted)\n";
    for (size_t i = 0; i < ttft.size(); ++i)
      l << static_cast<double>(i + 1) / static_cast<double>(ttft.size()) << ' ' << ttft[i] << ' ' << e2e[i] << '\n';
    if (!d || !l) return internalError("--plot: cannot write " + rate + " or " + latency);
  }
  {
    std::ofstream g(script);
    g << "set terminal pngcairo size 1200,450\nset output '" << png << "'\nset multiplot layout 1,2\nset grid\n"
      << "set xlabel 'time (s)'\nset ylabel 'output tokens/s'\nplot '" << rate
      << "' using 1:2 with steps title 'output tokens/s'\n"
      << "set xlabel 'ms'\nset ylabel 'fraction of requests'\nset key right bottom\nplot '" << latency
      << "' using 2:1 with lines title 'TTFT', '' using 3:1 with lines title 'end to end'\n"
      << "unset multiplot\n";
    if (!g) return internalError("--plot: cannot write " + script);
  }
  return runGnuplot(script, rate);
}

Status plotSweep(const std::vector<SweepPoint>& points, const std::array<std::string, 2>& names,
                 const std::string& png) {
  const std::string data = png + ".dat", script = png + ".gp";
  {
    std::ofstream d(data);
    d << "# concurrency output_tokens_per_s median_" << names[0] << "_ms median_" << names[1] << "_ms\n";
    for (const SweepPoint& p : points)
      d << p.concurrency << ' ' << p.output_tokens_per_s << ' ' << p.latency[0] << ' ' << p.latency[1] << '\n';
    std::ofstream g(script);
    g << "set terminal pngcairo size 1200,450\nset output '" << png << "'\nset multiplot layout 1,2\n"
      << "set xlabel 'output tokens/s'\nset grid\nset key left top\n";
    for (int i = 0; i < 2; ++i)
      g << "set ylabel 'median " << names[i] << " (ms)'\nplot '" << data << "' using 2:" << i + 3
        << " with linespoints title '" << names[i] << "', '' using 2:" << i + 3 << ":1 with labels offset 0,1 notitle\n";
    g << "unset multiplot\n";
    if (!d || !g) return internalError("--plot: cannot write " + data + " or " + script);
  }
  return runGnuplot(script, data);
}

double msBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double minOf(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); }
double maxOf(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

PrefillFlops prefillFlops(const ModelConfig& m, int64_t n) {
  const double nd = static_cast<double>(n);
  PrefillFlops f;
  f.linear = 2.0 * nd * layerLinearParams(m) +
             2.0 * static_cast<double>(m.vocab_size) * static_cast<double>(m.hidden_size);
  f.attention = 4.0 * static_cast<double>(m.num_hidden_layers) * static_cast<double>(m.num_attention_heads) *
                static_cast<double>(m.head_dim) * nd * (nd + 1.0) / 2.0;
  return f;
}

json statsJson(const LlmStats& s) {
  return {{"steps", s.steps},
          {"context_tokens", s.context_tokens},
          {"generated_tokens", s.generated_tokens},
          {"busy_seconds", s.seconds},
          {"device_busy_seconds", s.device_seconds},
          {"generated_tokens_per_step", s.steps ? static_cast<double>(s.generated_tokens) / s.steps : 0.0},
          {"pauses", s.pauses},
          {"resumes", s.resumes},
          {"kv_reused_blocks", s.reused_blocks},
          {"kv_missed_blocks", s.missed_blocks},
          {"kv_evicted_blocks", s.evicted_blocks},
          {"kv_offloaded_blocks", s.offloaded_blocks},
          {"kv_onboarded_blocks", s.onboarded_blocks}};
}

LlmStats statsDelta(const LlmStats& a, const LlmStats& b) {
  LlmStats d;
  d.steps = a.steps - b.steps;
  d.pauses = a.pauses - b.pauses;
  d.resumes = a.resumes - b.resumes;
  d.context_tokens = a.context_tokens - b.context_tokens;
  d.generated_tokens = a.generated_tokens - b.generated_tokens;
  d.seconds = a.seconds - b.seconds;
  d.device_seconds = a.device_seconds - b.device_seconds;
  d.reused_blocks = a.reused_blocks - b.reused_blocks;
  d.missed_blocks = a.missed_blocks - b.missed_blocks;
  const uint64_t looked = d.reused_blocks + d.missed_blocks;
  d.reuse_hit_rate = looked ? static_cast<double>(d.reused_blocks) / static_cast<double>(looked) : 0.0;
  d.evicted_blocks = a.evicted_blocks - b.evicted_blocks;
  d.offloaded_blocks = a.offloaded_blocks - b.offloaded_blocks;
  d.onboarded_blocks = a.onboarded_blocks - b.onboarded_blocks;
  return d;
}

void printJsonLine(const json& j) {
  const std::string s = j.dump() + "\n";
  std::fputs(s.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace llmrt::bench
