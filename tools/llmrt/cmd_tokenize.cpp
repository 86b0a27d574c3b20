// llmrt tokenize / detokenize.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_common.h"
#include "llmrt/file_io.h"
#include "llmrt/tokenizer.h"

namespace llmrt::cli {
namespace {

struct TokenizerSource {
  std::string model_dir;
  std::string tokenizer_file;

  void addOptions(CLI::App* cmd) {
    auto* m = cmd->add_option("--model", model_dir,
                              "Model directory (its tokenizer.json, else tokenizer.model, else *.tiktoken)");
    auto* t = cmd->add_option("--tokenizer", tokenizer_file,
                              "Path of a tokenizer.json, a SentencePiece *.model or a *.tiktoken file");
    m->excludes(t);
  }

  Result<std::unique_ptr<Tokenizer>> load() const {
    if (model_dir.empty() && tokenizer_file.empty())
      return invalidArgument("one of --model DIR or --tokenizer FILE is required");
    std::string path = tokenizer_file;
    if (path.empty()) {
      std::optional<std::string> found = Tokenizer::findInDirectory(model_dir);
      if (!found)
        return notFound(model_dir + ": no tokenizer.json, tokenizer.model or *.tiktoken in the directory");
      path = *found;
    }
    // Look before the loader opens it: a FIFO would block the open, a device never end.
    LLMRT_RETURN_IF_ERROR(checkRegularFile(path, kMaxTextFileBytes));
    if (tokenizer_file.empty()) return Tokenizer::fromDirectory(model_dir);  // with tokenizer_config.json
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
    std::string input;
    if (*have_text) {
      input = *text;
    } else {
      auto in = readStandardInput(kMaxTextFileBytes);
      if (!in.isOk()) return fail(in.status());
      input = std::move(in).value();
    }
    auto encoded = (*tok)->encode(input, !*no_special);
    if (!encoded.isOk()) return fail(encoded.status());
    const std::vector<TokenId>& ids = *encoded;
    std::ostringstream out;
    if (*json) {
      nlohmann::json tokens = nlohmann::json::array();
      for (TokenId id : ids) tokens.push_back((*tok)->idToToken(id).value_or(""));
      out << nlohmann::json{{"ids", ids}, {"tokens", tokens}}.dump(-1, ' ', false,
                                                                    nlohmann::json::error_handler_t::replace)
          << "\n";
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
      auto in = readStandardInput(kMaxTextFileBytes);
      if (!in.isOk()) return fail(in.status());
      all = std::move(in).value();
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
