// llmrt serve: the OpenAI-compatible server (docs/serving.md), configured by flags, a
// serving.properties file or LMI's OPTION_* variables (tools/serve/serving_config.h).
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <pthread.h>

#include "cli_common.h"
#include "llmrt/config_options.h"
#include "llmrt/file_io.h"
#include "llmrt/util.h"
#include "option_flags.h"
#include "server.h"
#include "serving_config.h"

extern char** environ;

namespace llmrt::cli {

Command addServeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, ...)");
  struct Flags {
    std::string model_dir, config_file, log_level = "warning";
    serve::ServeOptions serve;
    size_t max_request_bytes = serve::HttpLimits{}.max_body_bytes;
    bool print_config = false;
    OptionFlags options;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("model_dir", f->model_dir, "Model directory (or --model, option.model_id, HF_MODEL_ID)");
  cmd->add_option("--config", f->config_file,
                  "LMI serving.properties file (default: <model dir>/serving.properties when present)");
  cmd->add_option("--host", f->serve.host, "Address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", f->serve.port, "Port (default 8000; 0 = any free port)");
  cmd->add_option("--api-key", f->serve.api_key,
                  "Require 'Authorization: Bearer KEY' on every endpoint but /health (also LLMRT_API_KEY)");
  cmd->add_option("--served-model-name", f->serve.served_model_name, "Model name in the API (default: the directory's name)");
  cmd->add_option("--chat-template", f->serve.chat_template_file, "Jinja chat template file (default: the model's)");
  cmd->add_option("--max-queued-requests", f->serve.max_queued_requests,
                  "Waiting requests before 429 (LMI job_queue_size; default 1000)")
      ->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--max-output-len", f->serve.max_output_len, "Most tokens one request may generate (0: no limit)")
      ->check(CLI::Range(0, (1 << 30)));
  cmd->add_option("--max-request-bytes", f->max_request_bytes, "Largest request body (default 8 MiB)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 34));
  cmd->add_option("--shutdown-timeout", f->serve.shutdown_timeout_s,
                  "Seconds in-flight requests may take to finish after SIGTERM (default 30)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--io-threads", f->serve.io_threads, "HTTP threads (default 2)")->check(CLI::Range(1, 64));
  cmd->add_flag("--print-config", f->print_config, "Print the resolved configuration with each value's source and exit");
  cmd->add_option("--log-level", f->log_level, "trace|debug|info|warning|error|off (default: warning)");
  EngineConfig defaults;
  f->options.addEngineOptions(cmd, defaults);
  return {cmd, [f, cmd]() -> int {
    if (Status s = setLogLevelByName(f->log_level); !s.isOk()) return fail(s.message(), kExitUsage);
    std::map<std::string, std::string> env;
    for (char** e = environ; e && *e; ++e) {
      std::string kv = *e;
      if (size_t eq = kv.find('='); eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    EngineConfig config;
    serve::ServeOptions& so = f->serve;
    so.http.max_body_bytes = f->max_request_bytes;
    serve::Provenance prov;
    // LMI sources: environment, then serving.properties over it.
    serve::LmiSettings lmi = serve::lmiFromEnvironment(env);
    // The model directory, where a serving.properties may sit: the argument, --model, option.model_id.
    std::string model_hint = f->model_dir;
    if (model_hint.empty() && f->options.given("model")) {
      EngineConfig flags_only;
      (void)f->options.applyEngine(flags_only);  // (errors are reported when the flags are applied below)
      model_hint = flags_only.model;
    }
    if (model_hint.empty() && lmi.count("option.model_id")) model_hint = lmi.at("option.model_id").value;
    std::string props = f->config_file;
    if (props.empty() && !model_hint.empty() && std::filesystem::is_regular_file(model_hint + "/serving.properties"))
      props = model_hint + "/serving.properties";
    if (!props.empty()) {
      auto text = readRegularFile(props, 1u << 20);
      if (!text.isOk()) return fail(text.status());
      auto parsed = serve::parseProperties(*text, props);
      if (!parsed.isOk()) return fail(parsed.status().message(), kExitUsage);
      for (auto& [k, v] : *parsed) lmi[k] = v;
    }
    auto applied = serve::applyLmi(lmi, config, so, prov);
    if (!applied.isOk()) return fail(applied.status().message(), kExitUsage);
    for (const std::string& w : applied->warnings) std::fprintf(stderr, "llmrt serve: warning: %s\n", w.c_str());
    // Flags over both.
    if (Status s = f->options.applyEngine(config); !s.isOk()) return fail(s.message(), kExitUsage);
    for (const OptionInfo& o : engineOptionTable())
      if (f->options.given(o.key)) prov[std::string(o.key)] = std::string(o.flag);
    if (!f->model_dir.empty()) {
      config.model = f->model_dir;
      prov["model"] = "command line";
    }
    if (config.model.empty()) {
      config.model = defaultModelDir();
      prov["model"] = "default (the bundled model)";
    }
    if (so.api_key.empty() && env.count("LLMRT_API_KEY")) {
      so.api_key = env.at("LLMRT_API_KEY");
      prov["serve.api_key"] = "LLMRT_API_KEY";
    }
    for (const char* flag : {"--host", "--port", "--api-key", "--served-model-name", "--chat-template",
                             "--max-queued-requests", "--max-output-len", "--max-request-bytes", "--shutdown-timeout"}) {
      if (cmd->count(flag) == 0) continue;
      std::string key = std::string("serve.") + (flag + 2);
      for (char& c : key)
        if (c == '-') c = '_';
      prov[key] = flag;
    }
    if (f->print_config) {
      std::fputs(serve::describeServeConfig(config, so, prov).c_str(), stdout);
      return 0;
    }
    // SIGINT / SIGTERM are taken by this thread (sigwait); the server's threads inherit the mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    auto server = serve::Server::start(config, so);
    if (!server.isOk()) return fail(server.status());
    std::fprintf(stderr, "llmrt serve: listening on http://%s:%u (loading %s)\n", so.host.c_str(),
                 static_cast<unsigned>((*server)->port()), config.model.c_str());
    std::fflush(stderr);
    if (Status s = (*server)->waitReady(); !s.isOk()) {
      (*server)->drainAndStop();
      return fail(s);
    }
    std::fprintf(stderr, "llmrt serve: ready on http://%s:%u\n", so.host.c_str(), static_cast<unsigned>((*server)->port()));
    std::fflush(stderr);
    int sig = 0;
    sigwait(&signals, &sig);
    std::fprintf(stderr, "llmrt serve: %s: draining (up to %gs), then stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
                 so.shutdown_timeout_s);
    (*server)->drainAndStop();
    std::fprintf(stderr, "llmrt serve: stopped\n");
    return 0;
  }};
}

}  // namespace llmrt::cli
