// llmrt tokenize / detokenize.
#include <cstdio>
#include <memory>
#include <sstream>

#include "cli_common.h"
#include "llmrt/tokenizer.h"

namespace llmrt::cli {
namespace {

struct TokenizerSource {
  std::string model_dir;
  std::string tokenizer_file;

  void addOptions(CLI::App* cmd) {
    auto* m = cmd->add_option("--model", model_dir, "Model directory (reads its tokenizer.json)");
    auto* t = cmd->add_option("--tokenizer", tokenizer_file, "Path of a tokenizer.json");
    m->excludes(t);
  }

  Result<std::unique_ptr<Tokenizer>> load() const {
    if (model_dir.empty() && tokenizer_file.empty())
      return invalidArgument("one of --model DIR or --tokenizer FILE is required");
    std::string path = tokenizer_file.empty() ? model_dir + "/tokenizer.json" : tokenizer_file;
    return Tokenizer::fromFile(path);
  }
};

}  // namespace

Command addTokenizeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Encode text to token ids (text from TEXT or stdin)");
  auto src = std::make_shared<TokenizerSource>();
  auto no_special = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  auto text = std::make_shared<std::string>();
  auto have_text = std::make_shared<bool>(false);
  src->addOptions(cmd);
  cmd->add_flag("--no-special", *no_special, "Do not add special tokens (BOS/EOS)");
  cmd->add_flag("--json", *json, "Print {\"ids\": [...], \"tokens\": [...]}");
  cmd->add_option("text", *text, "Text to encode (default: standard input)")
      ->each([have_text](const std::string&) { *have_text = true; });
  return {cmd, [=]() -> int {
    auto tok = src->load();
    if (!tok.isOk()) return fail(tok.status());
    std::string input = *have_text ? *text : readStdin();
    std::vector<TokenId> ids = (*tok)->encode(input, !*no_special);
    std::ostringstream out;
    if (*json) {
      out << "{\"ids\": [";
      for (size_t i = 0; i < ids.size(); ++i) out << (i ? ", " : "") << ids[i];
      out << "], \"tokens\": [";
      for (size_t i = 0; i < ids.size(); ++i)
        out << (i ? ", " : "") << '"' << jsonEscape((*tok)->idToToken(ids[i]).value_or("")) << '"';
      out << "]}\n";
    } else {
      for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
      out << "\n";
    }
    std::fputs(out.str().c_str(), stdout);
    return 0;
  }};
}

Command addDetokenizeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("detokenize", "Decode token ids (arguments or stdin; commas or spaces) to text");
  auto src = std::make_shared<TokenizerSource>();
  auto skip_special = std::make_shared<bool>(false);
  auto ids_text = std::make_shared<std::vector<std::string>>();
  src->addOptions(cmd);
  cmd->add_flag("--skip-special", *skip_special, "Leave special tokens out of the text");
  cmd->add_option("ids", *ids_text, "Token ids (default: standard input)");
  return {cmd, [=]() -> int {
    auto tok = src->load();
    if (!tok.isOk()) return fail(tok.status());
    std::string all;
    if (ids_text->empty()) {
      all = readStdin();
    } else {
      for (const auto& s : *ids_text) all += s + " ";
    }
    auto ids = parseTokenIds(all);
    if (!ids.isOk()) return fail(ids.status().message(), kExitUsage);
    const size_t vocab = (*tok)->vocabSize();
    for (TokenId id : *ids)
      if (static_cast<size_t>(id) >= vocab)
        return fail("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")",
                    kExitUsage);
    std::string text = (*tok)->decode(*ids, *skip_special);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }};
}

}  // namespace llmrt::cli
