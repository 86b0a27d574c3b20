// llmrt generate: text (or ids) in, generated text out, streamed as it comes.
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>

#include "cli_common.h"
#include "generate_batch.h"
#include "llmrt/llm.h"
#include "llmrt/util.h"

namespace llmrt::cli {
namespace {

struct GenerateFlags {
  std::string model, prompt, input_ids, backend = "cpu", dtype = "auto", logits_npy, gen_logits_npy, log_level = "warning";
  int max_tokens = 64, top_k = 0, min_tokens = 0, n = 1, threads = 0;
  float temperature = 0.0f, top_p = 1.0f, min_p = 0.0f, repetition_penalty = 1.0f, presence_penalty = 0.0f,
        frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;
  std::optional<int> logprobs;
  std::vector<std::string> stop;
  std::vector<int> stop_token_ids;
  bool ignore_eos = false, json = false;
  int64_t max_seq_len = 0, max_num_tokens = 8192, kv_max_tokens = 0;
  int tokens_per_block = 32;
  std::string kv_dtype = "auto";
  std::string overlap = "auto";
  // Batch mode and runtime knobs.
  std::string input_file, output_file, scheduler_policy = "guaranteed_no_evict",
                                       chunking_policy = "first_come_first_served";
  int max_batch_size = 256;
  int64_t max_input_len = 0;
  std::optional<double> kv_fraction;
  uint64_t kv_host_bytes = 0;
  std::optional<int> max_attention_window;
  bool enable_chunked = false, disable_chunked = false, enable_reuse = false, disable_reuse = false;
};

std::string idsJson(const std::vector<TokenId>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

}  // namespace

Command addGenerateCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Generate text from a prompt");
  auto f = std::make_shared<GenerateFlags>();
  cmd->add_option("--model", f->model, "HF model directory (default: the bundled models/llmrt-tiny)");
  auto* p = cmd->add_option("--prompt", f->prompt, "Prompt text (special tokens such as BOS are added)");
  auto* ids = cmd->add_option("--input-ids", f->input_ids, "Prompt as token ids, e.g. 1,2,3 (no BOS added)");
  p->excludes(ids);
  cmd->add_option("--max-tokens", f->max_tokens, "Most tokens to generate")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--min-tokens", f->min_tokens, "Generate at least this many tokens")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--temperature", f->temperature, "0 = greedy (default)");
  cmd->add_option("--top-k", f->top_k, "0 = disabled");
  cmd->add_option("--top-p", f->top_p, "1 = disabled");
  cmd->add_option("--min-p", f->min_p, "0 = disabled");
  cmd->add_option("--repetition-penalty", f->repetition_penalty);
  cmd->add_option("--presence-penalty", f->presence_penalty);
  cmd->add_option("--frequency-penalty", f->frequency_penalty);
  cmd->add_option("--seed", f->seed, "Sampling seed (reproducible output)");
  cmd->add_option("--stop", f->stop, "Stop string (repeatable)");
  cmd->add_option("--stop-token-id", f->stop_token_ids, "Extra stop token id (repeatable)");
  cmd->add_flag("--ignore-eos", f->ignore_eos, "Do not stop at EOS");
  cmd->add_option("--logprobs", f->logprobs, "Report logprobs of chosen tokens and N alternatives");
  cmd->add_option("--n", f->n, "Independent samples of the prompt");
  cmd->add_option("--backend", f->backend, "cpu | cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--dtype", f->dtype, "Weights/compute dtype: auto | bfloat16 | float16 | float32")
      ->check(CLI::IsMember({"auto", "bfloat16", "float16", "float32"}));
  cmd->add_option("--threads", f->threads, "CPU threads (0 = all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("--max-seq-len", f->max_seq_len, "Prompt + generated tokens (default: the model's limit)");
  cmd->add_option("--max-num-tokens", f->max_num_tokens, "Tokens computed per step");
  cmd->add_option("--kv-cache-max-tokens", f->kv_max_tokens, "KV cache size in tokens");
  cmd->add_option("--tokens-per-block", f->tokens_per_block, "KV cache block size (power of two)");
  cmd->add_option("--overlap", f->overlap,
                  "auto | on | off: launch step N+1 before step N's tokens are back (default auto: on with CUDA)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--kv-cache-dtype", f->kv_dtype, "KV cache element type: auto | float32 | bfloat16 | float16")
      ->check(CLI::IsMember({"auto", "float32", "bfloat16", "float16"}));
  cmd->add_option("--output-logits-npy", f->logits_npy, "Write the prompt's logits [tokens, vocab] as .npy");
  cmd->add_option("--output-generation-logits-npy", f->gen_logits_npy,
                  "Write the logits of each generated step [steps, vocab] as .npy");
  cmd->add_flag("--json", f->json, "Print one JSON object instead of streaming text");
  auto* in_file = cmd->add_option("--input-file", f->input_file,
                                  "Batch mode: JSON lines of requests ({\"prompt\"|\"input_ids\", sampling fields, "
                                  "kv_cache_retention_config})");
  in_file->excludes(p)->excludes(ids);
  cmd->add_option("--output-file", f->output_file, "Batch mode: write the JSON lines of results here (default stdout)");
  cmd->add_option("--max-batch-size", f->max_batch_size, "Sequences in flight at once")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-input-len", f->max_input_len, "Longest prompt (default max_seq_len - 1)");
  cmd->add_option("--scheduler-policy", f->scheduler_policy, "guaranteed_no_evict | max_utilization | static_batch")
      ->check(CLI::IsMember({"guaranteed_no_evict", "max_utilization", "static_batch"}, CLI::ignore_case));
  auto* en_chunk = cmd->add_flag("--enable-chunked-context", f->enable_chunked, "Compute long prompts in chunks (default)");
  cmd->add_flag("--disable-chunked-context", f->disable_chunked, "Compute each prompt in one step")->excludes(en_chunk);
  cmd->add_option("--context-chunking-policy", f->chunking_policy, "first_come_first_served | equal_progress")
      ->check(CLI::IsMember({"first_come_first_served", "equal_progress"}, CLI::ignore_case));
  cmd->add_option("--kv-cache-free-gpu-mem-fraction", f->kv_fraction, "Fraction of free memory for the KV cache");
  auto* en_reuse = cmd->add_flag("--enable-kv-cache-reuse", f->enable_reuse, "Reuse cached prefixes (default)");
  cmd->add_flag("--disable-kv-cache-reuse", f->disable_reuse, "Do not reuse cached prefixes")->excludes(en_reuse);
  cmd->add_option("--kv-host-cache-bytes", f->kv_host_bytes, "Host (secondary) KV cache size in bytes; 0 = none");
  cmd->add_option("--max-attention-window", f->max_attention_window, "Sliding attention window in tokens");
  cmd->add_option("--log-level", f->log_level, "trace|debug|info|warning|error|off");
  return {cmd, [f]() -> int {
    if (f->prompt.empty() && f->input_ids.empty() && f->input_file.empty())
      return fail("one of --prompt or --input-ids (or --input-file) is required", kExitUsage);
    if (Status s = setLogLevelByName(f->log_level); !s.isOk()) return fail(s.message(), kExitUsage);
    LlmArgs args;
    args.model = f->model.empty() ? defaultModelDir() : f->model;
    args.backend = f->backend;
    args.dtype = f->dtype;
    args.max_seq_len = f->max_seq_len;
    args.max_num_tokens = f->max_num_tokens;
    args.num_threads = f->threads;
    args.kv_cache_config.tokens_per_block = f->tokens_per_block;
    args.kv_cache_config.dtype = f->kv_dtype;
    args.overlap = f->overlap;
    if (f->kv_max_tokens > 0) args.kv_cache_config.max_tokens = f->kv_max_tokens;
    args.kv_cache_config.free_gpu_memory_fraction = f->kv_fraction;
    args.kv_cache_config.host_cache_size = f->kv_host_bytes;
    args.kv_cache_config.max_attention_window = f->max_attention_window;
    if (f->disable_reuse) args.kv_cache_config.enable_block_reuse = false;
    args.max_batch_size = f->max_batch_size;
    args.max_input_len = f->max_input_len;
    args.scheduler_config.capacity_scheduler_policy = *parseCapacitySchedulerPolicy(f->scheduler_policy);
    args.scheduler_config.context_chunking_policy = *parseContextChunkingPolicy(f->chunking_policy);
    if (f->disable_chunked) args.scheduler_config.enable_chunked_context = false;
    auto llm = LLM::create(args);
    if (!llm.isOk()) return fail(llm.status());

    Prompt prompt;
    if (!f->input_ids.empty()) {
      auto parsed = parseTokenIds(f->input_ids);
      if (!parsed.isOk()) return fail("--input-ids: " + parsed.status().message(), kExitUsage);
      if (parsed->empty()) return fail("--input-ids: no ids given", kExitUsage);
      prompt = Prompt::fromIds(*parsed);
    } else {
      prompt = Prompt::fromText(f->prompt);
    }
    SamplingParams sp = (*llm)->defaultSamplingParams();
    sp.temperature = f->temperature;
    sp.top_k = f->top_k;
    sp.top_p = f->top_p;
    sp.min_p = f->min_p;
    sp.repetition_penalty = f->repetition_penalty;
    sp.presence_penalty = f->presence_penalty;
    sp.frequency_penalty = f->frequency_penalty;
    sp.seed = f->seed;
    sp.max_tokens = f->max_tokens;
    sp.min_tokens = f->min_tokens;
    sp.ignore_eos = f->ignore_eos;
    sp.stop = f->stop;
    sp.stop_token_ids.assign(f->stop_token_ids.begin(), f->stop_token_ids.end());
    sp.logprobs = f->logprobs;
    sp.n = f->n;
    if (!f->input_file.empty()) return runGenerateBatch(**llm, sp, f->input_file, f->output_file);
    RequestOptions ro;
    ro.return_context_logits = !f->logits_npy.empty();
    ro.return_generation_logits = !f->gen_logits_npy.empty();

    const bool stream = !f->json;
    if (stream && prompt.text) {
      std::fputs(prompt.text->c_str(), stdout);
      std::fflush(stdout);
    }
    TokenCallback cb = nullptr;
    if (stream && f->n == 1) {
      cb = [](size_t, int, TokenId, const std::string& text, FinishReason) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
      };
    }
    auto outs = (*llm)->generate({prompt}, {sp}, {ro}, cb);
    if (!outs.isOk()) return fail(outs.status());
    const RequestOutput& out = (*outs)[0];
    if (!out.status.isOk()) {
      if (stream) std::fputc('\n', stdout);
      return fail(out.status);
    }
    const int64_t vocab = (*llm)->modelConfig().vocab_size;
    if (!f->logits_npy.empty()) {
      Status s = writeNpyFile(f->logits_npy, out.context_logits.data(),
                              {static_cast<int64_t>(out.prompt_token_ids.size()), vocab});
      if (!s.isOk()) return fail(s);
    }
    if (!f->gen_logits_npy.empty()) {
      const auto& g = out.outputs[0].generation_logits;
      Status s = writeNpyFile(f->gen_logits_npy, g.data(), {static_cast<int64_t>(g.size()) / vocab, vocab});
      if (!s.isOk()) return fail(s);
    }
    LlmStats st = (*llm)->stats();
    const size_t generated = out.outputs[0].token_ids.size();
    const double decode_s = out.total_time_s - out.time_to_first_token_s;
    const double tps = generated > 1 && decode_s > 0 ? static_cast<double>(generated - 1) / decode_s : 0.0;
    if (stream) {
      if (f->n > 1) {
        for (const auto& c : out.outputs) std::printf("\n[%d] %s", c.index, c.text.c_str());
      }
      std::fputc('\n', stdout);
      std::fflush(stdout);
      std::fprintf(stderr, "[%zu prompt tokens, %zu generated, finish: %s, TTFT %.1f ms, %.1f tokens/s]\n",
                   out.prompt_token_ids.size(), generated, std::string(toString(out.outputs[0].finish_reason)).c_str(),
                   out.time_to_first_token_s * 1e3, tps);
      return 0;
    }
    std::string j = "{\"prompt_ids\": " + idsJson(out.prompt_token_ids) + ", \"outputs\": [";
    for (size_t i = 0; i < out.outputs.size(); ++i) {
      const CompletionOutput& c = out.outputs[i];
      j += std::string(i ? ", " : "") + "{\"index\": " + std::to_string(c.index) + ", \"output_ids\": " +
           idsJson(c.token_ids) + ", \"text\": \"" + jsonEscape(c.text) + "\", \"finish_reason\": \"" +
           std::string(toString(c.finish_reason)) + "\"";
      if (!c.logprobs.empty()) {
        j += ", \"logprobs\": [";
        for (size_t t = 0; t < c.logprobs.size(); ++t) {
          const TokenLogprobs& lp = c.logprobs[t];
          j += std::string(t ? ", " : "") + "{\"token\": " + std::to_string(lp.chosen.token) +
               ", \"logprob\": " + jsonNumber(lp.chosen.logprob) + ", \"top\": [";
          for (size_t k = 0; k < lp.top.size(); ++k)
            j += std::string(k ? ", " : "") + "[" + std::to_string(lp.top[k].token) + ", " +
                 jsonNumber(lp.top[k].logprob) + "]";
          j += "]}";
        }
        j += "]";
      }
      j += "}";
    }
    j += "], \"output_ids\": " + idsJson(out.outputs[0].token_ids) + ", \"text\": \"" + jsonEscape(out.outputs[0].text) +
         "\", \"finish_reason\": \"" + std::string(toString(out.outputs[0].finish_reason)) + "\"";
    j += ", \"cached_tokens\": " + std::to_string(out.cached_tokens);
    j += ", \"timing\": {\"time_to_first_token_ms\": " + jsonNumber(out.time_to_first_token_s * 1e3) +
         ", \"total_ms\": " + jsonNumber(out.total_time_s * 1e3) + ", \"decode_tokens_per_s\": " + jsonNumber(tps) +
         ", \"steps\": " + std::to_string(st.steps) + "}}\n";
    std::fputs(j.c_str(), stdout);
    return 0;
  }};
}

}  // namespace llmrt::cli
