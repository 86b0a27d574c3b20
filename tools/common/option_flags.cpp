#include "option_flags.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "llmrt/util.h"

namespace llmrt::cli {

namespace {

std::string helpText(const OptionInfo& info, const std::string& default_value) {
  std::string h(info.help);
  if (info.kind == OptionKind::kBool) {
    h += default_value == "true" ? " (default: on)" : " (default: off)";
  } else if (!default_value.empty()) {
    h += " (default: " + default_value + ")";
  }
  return h;
}

bool skipped(std::string_view key, const std::vector<std::string_view>& skip) {
  return std::find(skip.begin(), skip.end(), key) != skip.end();
}

}  // namespace

void OptionFlags::add(CLI::App* cmd, const OptionInfo& info, bool engine, const std::string& default_value) {
  auto f = std::make_unique<Flag>();
  f->info = &info;
  f->engine = engine;
  const std::string flag(info.flag);
  if (info.kind == OptionKind::kBool) {
    CLI::Option* on = cmd->add_flag(flag, f->values, helpText(info, default_value));
    if (!info.negation.empty()) {
      CLI::Option* off =
          cmd->add_flag(std::string(info.negation), f->negated, "The opposite of " + flag);
      off->excludes(on);
    }
  } else {
    CLI::Option* o = cmd->add_option(flag, f->values, helpText(info, default_value));
    o->type_name(std::string(info.value_name));
    o->allow_extra_args(false);
    const bool list = info.kind == OptionKind::kIntList || info.kind == OptionKind::kStringList;
    o->multi_option_policy(list ? CLI::MultiOptionPolicy::TakeAll : CLI::MultiOptionPolicy::TakeLast);
  }
  flags_.push_back(std::move(f));
}

void OptionFlags::addEngineOptions(CLI::App* cmd, const EngineConfig& defaults, std::vector<std::string_view> skip) {
  for (const OptionInfo& o : engineOptionTable())
    if (!skipped(o.key, skip)) add(cmd, o, true, engineOptionValue(defaults, o.key));
}

void OptionFlags::addSamplingOptions(CLI::App* cmd, const SamplingParams& defaults, std::vector<std::string_view> skip) {
  for (const OptionInfo& o : samplingOptionTable())
    if (!skipped(o.key, skip)) add(cmd, o, false, samplingOptionValue(defaults, o.key));
}

Status OptionFlags::apply(const Flag& f, EngineConfig* config, SamplingParams* params) const {
  auto set = [&](std::string_view name, const std::string& v) {
    return config ? setEngineOption(*config, name, v) : setSamplingOption(*params, name, v);
  };
  for (const std::string& v : f.values) LLMRT_RETURN_IF_ERROR(set(f.info->flag, v));
  for (const std::string& v : f.negated) LLMRT_RETURN_IF_ERROR(set(f.info->negation, v));
  return Status::ok();
}

Status OptionFlags::applyEngine(EngineConfig& config) const {
  for (const auto& f : flags_)
    if (f->engine) LLMRT_RETURN_IF_ERROR(apply(*f, &config, nullptr));
  // Quantization calibrated at load reads the bundled model's calibration text unless told otherwise.
  if ((config.quantization == Quantization::kSmoothQuant || config.quantization == Quantization::kAwq) &&
      config.calibration_file.empty())
    config.calibration_file = defaultModelDir() + "/calibration.txt";
  return Status::ok();
}

std::string defaultModelDir() {
  struct stat st {};
  auto has = [&](const std::string& dir) { return ::stat((dir + "/config.json").c_str(), &st) == 0; };
  const std::string local = "models/llmrt-tiny";
  if (has(local)) return local;
  // An installed command (cmake --install): <prefix>/bin/llmrt beside <prefix>/share/llmrt/models.
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string dir(exe, static_cast<size_t>(n));
    dir = dir.substr(0, dir.find_last_of('/'));
    const std::string installed = dir + "/../share/llmrt/models/llmrt-tiny";
    if (has(installed)) return installed;
  }
  return LLMRT_DEFAULT_MODEL_DIR;  // the source tree this binary was built from
}


Status OptionFlags::applySampling(SamplingParams& params) const {
  for (const auto& f : flags_)
    if (!f->engine) LLMRT_RETURN_IF_ERROR(apply(*f, nullptr, &params));
  return Status::ok();
}

bool OptionFlags::given(std::string_view key) const {
  // (A front end may register the tables on several subcommands; only the parsed one has values.)
  for (const auto& f : flags_)
    if (f->info->key == key && (!f->values.empty() || !f->negated.empty())) return true;
  return false;
}

int reportParseError(CLI::App& app, const CLI::ParseError& e, std::string_view program) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
  std::string message = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    // The first unknown flag, with the nearest flag of the command that was being parsed.
    CLI::App* cmd = &app;
    for (CLI::App* sub : app.get_subcommands()) cmd = sub;
    std::vector<std::string> known;
    for (const CLI::Option* o : cmd->get_options())
      for (const std::string& n : o->get_lnames()) known.push_back("--" + n);
    for (const std::string& arg : cmd->remaining()) {
      if (arg.rfind("--", 0) != 0) continue;
      const std::string name = arg.substr(0, arg.find('='));
      message = "unknown option '" + name + "'" + didYouMean(name, known);
      break;
    }
  }
  std::fprintf(stderr, "%.*s: error: %s\n", static_cast<int>(program.size()), program.data(), message.c_str());
  std::fprintf(stderr, "Run with --help for more information.\n");
  return 2;
}

}  // namespace llmrt::cli
