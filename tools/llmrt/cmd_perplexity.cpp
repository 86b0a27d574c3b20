// llmrt perplexity: teacher-forced perplexity of a text file, reported as
// llama.cpp's perplexity tool does: the text is cut into chunks of --context
// tokens (each starting with BOS when the tokenizer adds one); the first half
// of each chunk is context only and the second half is scored.
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "cli_common.h"
#include "llmrt/llm.h"
#include "llmrt/util.h"

namespace llmrt::cli {

Command addPerplexityCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("perplexity", "Perplexity of a text file (teacher forcing)");
  struct Flags {
    std::string model, file, log_level = "warning";
    int64_t context = 512;
    int threads = 0;
    int64_t max_chunks = 0;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("--model", f->model, "HF model directory (default: the bundled models/llmrt-tiny)");
  cmd->add_option("--file", f->file, "Text file")->required();
  cmd->add_option("--context", f->context, "Tokens per chunk (default 512)")->check(CLI::Range(4, 1 << 20));
  cmd->add_option("--chunks", f->max_chunks, "Score at most this many chunks (0 = all)");
  cmd->add_option("--threads", f->threads, "CPU threads (0 = all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("--log-level", f->log_level, "trace|debug|info|warning|error|off");
  return {cmd, [f]() -> int {
    if (Status s = setLogLevelByName(f->log_level); !s.isOk()) return fail(s.message(), kExitUsage);
    std::FILE* fp = std::fopen(f->file.c_str(), "rb");
    if (fp == nullptr) return fail(f->file + ": cannot open: " + std::strerror(errno));
    std::string text;
    char buf[65536];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof(buf), fp)) > 0) text.append(buf, got);
    std::fclose(fp);
    LlmArgs args;
    args.model = f->model.empty() ? defaultModelDir() : f->model;
    args.num_threads = f->threads;
    args.max_num_tokens = std::max<int64_t>(f->context, 8192);
    // Scoring runs each chunk as a prompt with max_tokens 1; that one sampled
    // token is never computed, so a chunk may fill the model's whole context.
    args.max_seq_len = f->context + 1;
    auto llm = LLM::create(args);
    if (!llm.isOk()) return fail(llm.status());
    const Tokenizer* tok = (*llm)->tokenizer();
    if (tok == nullptr) return fail("the model directory has no tokenizer.json");
    if (f->context > (*llm)->modelConfig().max_position_embeddings)
      return fail("--context " + std::to_string(f->context) + " exceeds the model's max_position_embeddings " +
                      std::to_string((*llm)->modelConfig().max_position_embeddings),
                  kExitUsage);
    std::vector<TokenId> ids = tok->encode(text, false);
    std::vector<TokenId> with_bos = tok->encode("", true);  // what add_special_tokens prepends (BOS or nothing)
    const int64_t bos = with_bos.empty() ? 0 : 1;
    const int64_t body = f->context - bos;
    int64_t n_chunks = static_cast<int64_t>(ids.size()) / body;
    if (f->max_chunks > 0) n_chunks = std::min(n_chunks, f->max_chunks);
    if (n_chunks < 1)
      return fail("the text has " + std::to_string(ids.size()) + " tokens; need at least " + std::to_string(body) +
                  " for one chunk of --context " + std::to_string(f->context));
    std::fprintf(stderr, "perplexity: %zu tokens, %lld chunks of %lld\n", ids.size(), static_cast<long long>(n_chunks),
                 static_cast<long long>(f->context));
    double nll = 0.0, nll2 = 0.0;
    int64_t count = 0;
    for (int64_t c = 0; c < n_chunks; ++c) {
      std::vector<TokenId> chunk(ids.begin() + c * body, ids.begin() + (c + 1) * body);
      if (bos) chunk.insert(chunk.begin(), with_bos[0]);
      auto lp = (*llm)->promptLogprobs(chunk);
      if (!lp.isOk()) return fail(lp.status());
      // lp[i] scores chunk[i + 1]; score the second half of the chunk.
      const int64_t first = static_cast<int64_t>(chunk.size()) / 2;
      for (int64_t i = first; i < static_cast<int64_t>(chunk.size()); ++i) {
        const double v = -(*lp)[static_cast<size_t>(i - 1)];
        nll += v;
        nll2 += v * v;
        ++count;
      }
      std::printf("[%lld]%.4f%s", static_cast<long long>(c + 1), std::exp(nll / static_cast<double>(count)),
                  c + 1 == n_chunks ? "\n" : ",");
      std::fflush(stdout);
    }
    const double mean = nll / static_cast<double>(count);
    const double var = nll2 / static_cast<double>(count) - mean * mean;
    const double ppl = std::exp(mean);
    const double err = count > 1 ? ppl * std::sqrt(std::max(0.0, var) / static_cast<double>(count - 1)) : 0.0;
    std::printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, err);
    return 0;
  }};
}

}  // namespace llmrt::cli
