#include "metrics.h"

#include <cmath>
#include <cstdio>

namespace llmrt::serve {
namespace {

std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void header(std::string& out, const std::string& name, const std::string& type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, const std::string& labels, double v) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    out += labels;
    out += '}';
  }
  out += ' ';
  out += num(v);
  out += '\n';
}

std::vector<double> latencyBuckets() {
  return {0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
          20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> tokenBuckets() {
  return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072};
}

}  // namespace

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lock(mu_);
  header(out, name, "histogram", help);
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    const double le = i < bounds_.size() ? bounds_[i] : INFINITY;
    sample(out, name + "_bucket", "le=\"" + num(le) + "\"", static_cast<double>(cum));
  }
  sample(out, name + "_sum", "", sum_);
  sample(out, name + "_count", "", static_cast<double>(count_));
}

Metrics::Metrics()
    : ttft_(latencyBuckets()),
      tpot_(latencyBuckets()),
      e2e_(latencyBuckets()),
      queue_(latencyBuckets()),
      prompt_len_(tokenBuckets()),
      gen_len_(tokenBuckets()),
      iter_tokens_(tokenBuckets()),
      step_time_(latencyBuckets()) {
  for (const char* r : {"stop", "length", "abort", "error"}) finished_[r] = 0;
}

void Metrics::recordRequest(const RequestRecord& r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const char* reason = r.finish == FinishReason::kStop        ? "stop"
                         : r.finish == FinishReason::kLength    ? "length"
                         : r.finish == FinishReason::kCancelled ? "abort"
                                                                : "error";
    ++finished_[reason];
    prompt_tokens_ += static_cast<uint64_t>(r.prompt_tokens);
    generation_tokens_ += static_cast<uint64_t>(r.generated_tokens);
    prefix_queries_ += static_cast<uint64_t>(r.prompt_tokens);
    prefix_hits_ += static_cast<uint64_t>(r.cached_tokens);
  }
  e2e_.observe(r.e2e_s);
  queue_.observe(r.queue_s);
  prompt_len_.observe(static_cast<double>(r.prompt_tokens));
  gen_len_.observe(static_cast<double>(r.generated_tokens));
  if (r.ttft_s >= 0.0) {
    ttft_.observe(r.ttft_s);
    if (r.generated_tokens > 1)
      tpot_.observe((r.e2e_s - r.ttft_s) / static_cast<double>(r.generated_tokens - 1));
  }
}

void Metrics::recordIterations(const std::vector<IterationStats>& its) {
  for (const IterationStats& it : its) {
    iter_tokens_.observe(static_cast<double>(it.num_context_tokens + it.num_generation_tokens));
    step_time_.observe(it.step_time_s);
  }
}

void Metrics::recordHttp(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++http_[status];
}

std::string Metrics::render(const ExecutorStats& s, const std::string& model_name) const {
  std::string out;
  std::string model = "model_name=\"";
  for (char c : model_name) {
    if (c == '"' || c == '\\') model += '\\';
    if (c == '\n') model += "\\n";
    else model += c;
  }
  model += "\"";
  auto gauge = [&](const std::string& name, const std::string& help, double v) {
    header(out, name, "gauge", help);
    sample(out, name, model, v);
  };
  auto counter = [&](const std::string& name, const std::string& help, double v) {
    header(out, name, "counter", help);
    sample(out, name, model, v);
  };
  gauge("llmrt:num_requests_running", "Requests with a sequence computing (prompt or generation).",
        s.num_running_requests);
  gauge("llmrt:num_requests_waiting", "Requests queued, not admitted yet.", s.num_waiting_requests);
  gauge("llmrt:num_requests_paused", "Requests paused by MAX_UTILIZATION (KV evicted, recomputed on resume).",
        s.num_paused_requests);
  gauge("llmrt:kv_cache_usage_perc", "Fraction of the KV cache's blocks in use (1 = full).",
        s.kv_total_blocks > 0 ? static_cast<double>(s.kv_used_blocks) / s.kv_total_blocks : 0.0);
  gauge("llmrt:kv_cache_total_blocks", "KV cache blocks in the primary pool.", s.kv_total_blocks);
  {
    std::lock_guard<std::mutex> lock(mu_);
    counter("llmrt:prompt_tokens_total", "Prompt tokens of finished requests.", static_cast<double>(prompt_tokens_));
    counter("llmrt:generation_tokens_total", "Generated tokens of finished requests.",
            static_cast<double>(generation_tokens_));
    counter("llmrt:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
            static_cast<double>(prefix_queries_));
    counter("llmrt:prefix_cache_hits_total", "Prompt tokens whose KV came from the prefix cache.",
            static_cast<double>(prefix_hits_));
    header(out, "llmrt:request_success_total", "counter", "Finished requests by finish reason.");
    for (const auto& [reason, n] : finished_)
      sample(out, "llmrt:request_success_total", model + ",finished_reason=\"" + reason + "\"", static_cast<double>(n));
    header(out, "llmrt:http_responses_total", "counter", "HTTP responses by status code.");
    for (const auto& [code, n] : http_)
      sample(out, "llmrt:http_responses_total", "code=\"" + std::to_string(code) + "\"", static_cast<double>(n));
  }
  counter("llmrt:kv_cache_reused_blocks_total", "Blocks found in the prefix cache.", static_cast<double>(s.kv_reused_blocks));
  counter("llmrt:kv_cache_missed_blocks_total", "Blocks looked up and not found.", static_cast<double>(s.kv_missed_blocks));
  counter("llmrt:kv_cache_offloaded_blocks_total", "Blocks copied to the host pool on eviction.",
          static_cast<double>(s.kv_offloaded_blocks));
  counter("llmrt:kv_cache_onboarded_blocks_total", "Blocks brought back from the host pool for reuse.",
          static_cast<double>(s.kv_onboarded_blocks));
  counter("llmrt:kv_cache_evicted_blocks_total", "Reusable blocks dropped from the primary pool.",
          static_cast<double>(s.kv_evicted_blocks));
  counter("llmrt:kv_cache_evicted_secondary_blocks_total", "Blocks dropped from the host pool.",
          static_cast<double>(s.kv_evicted_secondary_blocks));
  counter("llmrt:num_preemptions_total", "Sequences paused by MAX_UTILIZATION.", static_cast<double>(s.pauses));
  counter("llmrt:engine_steps_total", "Engine iterations.", static_cast<double>(s.steps));
  ttft_.render(out, "llmrt:time_to_first_token_seconds", "Enqueue to first generated token.");
  tpot_.render(out, "llmrt:time_per_output_token_seconds", "Mean time between generated tokens of a request.");
  e2e_.render(out, "llmrt:e2e_request_latency_seconds", "Enqueue to final response.");
  queue_.render(out, "llmrt:request_queue_time_seconds", "Enqueue to first scheduled.");
  prompt_len_.render(out, "llmrt:request_prompt_tokens", "Prompt tokens per request.");
  gen_len_.render(out, "llmrt:request_generation_tokens", "Generated tokens per request.");
  iter_tokens_.render(out, "llmrt:iteration_tokens_total", "Tokens computed per engine step.");
  step_time_.render(out, "llmrt:iteration_time_seconds", "Wall time per engine step.");
  return out;
}

}  // namespace llmrt::serve
