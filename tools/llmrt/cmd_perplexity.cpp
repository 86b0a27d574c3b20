// llmrt perplexity: teacher-forced perplexity of a text file, reported as
// llama.cpp's perplexity tool does: the text is cut into chunks of --context
// tokens (each starting with BOS when the tokenizer adds one); the first half
// of each chunk is context only and the second half is scored.
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "llmrt/file_io.h"
#include "llmrt/llm.h"
#include "llmrt/util.h"
#include "option_flags.h"

namespace llmrt::cli {

Command addPerplexityCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("perplexity", "Perplexity of a text file (teacher forcing)");
  struct Flags {
    std::string file, log_level = "warning";
    int64_t context = 512;
    int64_t max_chunks = 0;
    OptionFlags options;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("--file", f->file, "Text file")->required();
  cmd->add_option("--context", f->context, "Tokens per chunk (default 512)")->check(CLI::Range(4, 1 << 20));
  cmd->add_option("--chunks", f->max_chunks, "Score at most this many chunks (0 = all)")->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--log-level", f->log_level, "trace|debug|info|warning|error|off (default: warning)");
  EngineConfig defaults;
  defaults.model = defaultModelDir();
  // The chunk length sets the sequence limits.
  f->options.addEngineOptions(cmd, defaults, {"max_seq_len", "max_input_len"});
  return {cmd, [f]() -> int {
    if (Status s = setLogLevelByName(f->log_level); !s.isOk()) return fail(s.message(), kExitUsage);
    EngineConfig config;
    config.model = defaultModelDir();
    if (Status s = f->options.applyEngine(config); !s.isOk()) return fail(s.message(), kExitUsage);
    // Each chunk is one prompt (LLM::promptLogprobs): a chunk may fill the model's whole context.
    config.max_seq_len = f->context;
    if (!f->options.given("max_num_tokens")) config.max_num_tokens = std::max<int64_t>(f->context, 8192);
    if (Status s = config.validate(); !s.isOk()) return fail(s.message(), kExitUsage);
    auto read = readRegularFile(f->file, kMaxTextFileBytes);  // regular files only, at most 1 GiB
    if (!read.isOk()) return fail(read.status());
    const std::string text = std::move(read).value();
    auto llm = LLM::create(config);
    if (!llm.isOk()) return fail(llm.status());
    const Tokenizer* tok = (*llm)->tokenizer();
    if (tok == nullptr)
      return fail("the model directory has no tokenizer (tokenizer.json, tokenizer.model or *.tiktoken)");
    auto encoded = tok->encode(text, false);
    if (!encoded.isOk()) return fail(encoded.status());
    const std::vector<TokenId>& ids = *encoded;
    auto bos_only = tok->encode("", true);  // what add_special_tokens prepends (BOS or nothing)
    if (!bos_only.isOk()) return fail(bos_only.status());
    const std::vector<TokenId>& with_bos = *bos_only;
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
