// llmrt generate: text (or ids) in, generated text out, streamed as it comes.
// Engine and sampling flags come from the option tables (llmrt/config_options.h); everything
// the user gave is checked before the model is loaded.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "cli_common.h"
#include "generate_batch.h"
#include "llmrt/file_io.h"
#include "llmrt/llm.h"
#include "llmrt/util.h"
#include "option_flags.h"
#include "result_json.h"

namespace llmrt::cli {
namespace {

struct GenerateFlags {
  std::string prompt, input_ids, logits_npy, gen_logits_npy, log_level = "warning";
  std::string input_file, output_file, stats_file;
  bool json = false;
  OptionFlags options;
};

// The sampling defaults of this command before the model's generation_config.json and the
// user's flags: greedy, 64 tokens.
SamplingParams commandSamplingDefaults() {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 64;
  return p;
}

// Checks a prompt's text: valid UTF-8 (the tokenizer would turn invalid bytes into U+FFFD).
Status checkUtf8(const std::string& s, const char* flag) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (ok && n > 1) {  // no overlong forms, surrogates or values beyond U+10FFFF
      uint32_t cp = c & (0x7F >> n);
      for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      ok = (n == 2 && cp >= 0x80) || (n == 3 && cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) ||
           (n == 4 && cp >= 0x10000 && cp <= 0x10FFFF);
    }
    if (!ok)
      return invalidArgument(std::string(flag) + ": the prompt is not valid UTF-8 (byte offset " + std::to_string(i) +
                             "); pass token ids with --input-ids instead");
    i += n;
  }
  return Status::ok();
}

}  // namespace

Command addGenerateCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Generate text from a prompt");
  auto f = std::make_shared<GenerateFlags>();
  auto* p = cmd->add_option("--prompt", f->prompt,
                            "Prompt text (special tokens such as BOS are added); '-' reads it from stdin, as does "
                            "no prompt when stdin is not a terminal");
  auto* ids = cmd->add_option("--input-ids", f->input_ids, "Prompt as token ids, e.g. 1,2,3 (no BOS added)");
  p->excludes(ids);
  auto* in_file = cmd->add_option("--input-file", f->input_file,
                                  "Batch mode: JSON lines of requests (see the user guide; '-' = stdin)");
  in_file->excludes(p)->excludes(ids);
  cmd->add_option("--output-file", f->output_file, "Batch mode: write the result rows here (default stdout)")
      ->needs(in_file);
  cmd->add_option("--stats-file", f->stats_file, "Batch mode: write the run's statistics (JSON) here (default stderr)")
      ->needs(in_file);
  cmd->add_flag("--json", f->json, "Print one JSON object (the result schema) instead of streaming text");
  cmd->add_option("--output-logits-npy", f->logits_npy, "Write the prompt's logits [tokens, vocab] as .npy");
  cmd->add_option("--output-generation-logits-npy", f->gen_logits_npy,
                  "Write the logits of each generated step [steps, vocab] as .npy");
  cmd->add_option("--log-level", f->log_level, "trace|debug|info|warning|error|off (default: warning)");
  EngineConfig engine_defaults;
  engine_defaults.model = defaultModelDir();
  f->options.addEngineOptions(cmd, engine_defaults);
  f->options.addSamplingOptions(cmd, commandSamplingDefaults());
  cmd->footer("Sampling defaults: greedy and 64 tokens, then the model's generation_config.json, then these flags.");
  return {cmd, [f]() -> int {
    // Everything the user gave is checked before anything is loaded (usage errors: exit 2).
    if (Status s = setLogLevelByName(f->log_level); !s.isOk()) return fail(s.message(), kExitUsage);
    EngineConfig config;
    config.model = defaultModelDir();
    if (Status s = f->options.applyEngine(config); !s.isOk()) return fail(s.message(), kExitUsage);
    if (Status s = config.validate(); !s.isOk()) return fail(s.message(), kExitUsage);
    SamplingParams flags = commandSamplingDefaults();
    if (Status s = f->options.applySampling(flags); !s.isOk()) return fail(s.message(), kExitUsage);
    if (Status s = flags.validate(); !s.isOk()) return fail(s.message(), kExitUsage);

    Prompt prompt;
    if (!f->input_ids.empty()) {
      auto parsed = parseTokenIds(f->input_ids);
      if (!parsed.isOk()) return fail("--input-ids: " + parsed.status().message(), kExitUsage);
      if (parsed->empty()) return fail("--input-ids: no ids given", kExitUsage);
      prompt = Prompt::fromIds(*parsed);
    } else if (f->input_file.empty()) {
      std::string text = f->prompt;
      if (text == "-" || (text.empty() && !::isatty(STDIN_FILENO))) {
        auto in = readStandardInput(kMaxTextFileBytes);
        if (!in.isOk()) return fail(in.status());
        text = std::move(*in);
      }
      if (text.empty())
        return fail("one of --prompt, --input-ids or --input-file is required (or a prompt on stdin)", kExitUsage);
      if (Status s = checkUtf8(text, "--prompt"); !s.isOk()) return fail(s.message(), kExitUsage);
      prompt = Prompt::fromText(std::move(text));
    }

    auto llm = LLM::create(config);
    if (!llm.isOk()) return fail(llm.status());

    // The command's defaults, then generation_config.json's, then the flags the user gave.
    SamplingParams sp = (*llm)->defaultSamplingParams(commandSamplingDefaults());
    if (Status s = f->options.applySampling(sp); !s.isOk()) return fail(s.message(), kExitUsage);
    if (!f->input_file.empty()) return runGenerateBatch(**llm, sp, f->input_file, f->output_file, f->stats_file);

    RequestOptions ro;
    ro.return_context_logits = !f->logits_npy.empty();
    ro.return_generation_logits = !f->gen_logits_npy.empty();
    const bool stream = !f->json;
    if (stream && prompt.text) {
      std::fputs(prompt.text->c_str(), stdout);
      std::fflush(stdout);
    }
    TokenCallback cb = nullptr;
    if (stream && sp.n == 1) {
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
    const LlmStats st = (*llm)->stats();
    const size_t generated = out.outputs[0].token_ids.size();
    const double decode_s = out.total_time_s - out.time_to_first_token_s;
    const double tps = generated > 1 && decode_s > 0 ? static_cast<double>(generated - 1) / decode_s : 0.0;
    if (stream) {
      if (sp.n > 1) {
        for (const auto& c : out.outputs) std::printf("\n[%d] %s", c.index, c.text.c_str());
      }
      std::fputc('\n', stdout);
      std::fflush(stdout);
      std::fprintf(stderr, "[%zu prompt tokens, %zu generated, finish: %s, TTFT %.1f ms, %.1f tokens/s]\n",
                   out.prompt_token_ids.size(), generated, std::string(toString(out.outputs[0].finish_reason)).c_str(),
                   out.time_to_first_token_s * 1e3, tps);
      return 0;
    }
    nlohmann::json j = resultJson(out);
    j["timing"] = {{"time_to_first_token_ms", out.time_to_first_token_s * 1e3},
                   {"total_ms", out.total_time_s * 1e3},
                   {"decode_tokens_per_s", tps},
                   {"steps", st.steps}};
    std::fputs(jsonLine(j).c_str(), stdout);
    return 0;
  }};
}

}  // namespace llmrt::cli
