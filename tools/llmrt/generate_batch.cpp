#include "generate_batch.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli_common.h"
#include "llmrt/util.h"
#include "llmrt/file_io.h"
#include "llmrt/request_json.h"
#include "result_json.h"

namespace llmrt::cli {
namespace {

using nlohmann::json;

json errorRow(size_t index, const std::string& message) {
  return {{"index", index}, {"error", message}, {"finish_reason", "error"}};
}

// The result schema of result_json.h plus the request's "index"; a request
// the engine refused names its line as a bad input line does.
json resultRow(size_t index, const RequestOutput& r, const std::string& where) {
  if (!r.status.isOk()) return errorRow(index, where + ": " + r.status.message());
  json o = resultJson(r);
  o["index"] = index;
  return o;
}

// Rows go to an atomically replaced file, or to stdout.
class RowSink {
 public:
  static Result<RowSink> open(const std::string& path) {
    RowSink s;
    if (path.empty() || path == "-") return s;
    LLMRT_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::open(path));
    s.file_.emplace(std::move(w));
    return s;
  }
  Status write(const std::string& s) {
    if (file_) return file_->write(s);
    if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size())
      return ioError("writing standard output failed");
    return Status::ok();
  }
  Status finish() {
    if (file_) return file_->commit();
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) return ioError("writing standard output failed");
    return Status::ok();
  }

 private:
  std::optional<AtomicFileWriter> file_;
};

json statsJson(const LlmStats& st, size_t requests, size_t failed) {
  return {{"requests", requests},
          {"failed_requests", failed},
          {"steps", st.steps},
          {"context_tokens", st.context_tokens},
          {"generated_tokens", st.generated_tokens},
          {"seconds", st.seconds},
          {"kv_reuse_hit_rate", st.reuse_hit_rate},
          {"kv_reused_blocks", st.reused_blocks},
          {"kv_evicted_blocks", st.evicted_blocks},
          {"kv_offloaded_blocks", st.offloaded_blocks},
          {"kv_onboarded_blocks", st.onboarded_blocks},
          {"pauses", st.pauses},
          {"resumes", st.resumes}};
}

}  // namespace

int runGenerateBatch(LLM& llm, const SamplingParams& defaults, const std::string& input_file,
                     const std::string& output_file, const std::string& stats_file) {
  const bool from_stdin = input_file == "-";
  const bool to_stdout = output_file.empty() || output_file == "-";
  // Never write over the input (or one output over the other): checked by
  // inode before anything is read or created.
  if (!from_stdin && !to_stdout && isSameFile(output_file, input_file))
    return fail(
        "--output-file " + output_file + " is the input file " + input_file + "; write the results elsewhere",
        kExitUsage);
  if (!from_stdin && !stats_file.empty() && isSameFile(stats_file, input_file))
    return fail("--stats-file " + stats_file + " is the input file " + input_file, kExitUsage);
  if (!to_stdout && !stats_file.empty() && isSameFile(stats_file, output_file))
    return fail("--stats-file " + stats_file + " is the output file " + output_file, kExitUsage);

  const std::string name = from_stdin ? "<stdin>" : input_file;
  auto text =
      from_stdin ? readStandardInput(kMaxTextFileBytes) : readRegularFile(input_file, kMaxTextFileBytes);
  if (!text.isOk()) return fail(printableText(text.status().message(), 1000));
  // Whole-run errors: NUL bytes, no requests, no line a JSON object. A bad line is its own error row.
  auto parsed = parseJsonLinesRequests(*text, defaults, name);
  if (!parsed.isOk()) return fail(printableText(parsed.status().message(), 1000));
  std::vector<JsonLineRequest> lines = std::move(parsed).value();
  text = std::string();  // the requests hold what they need

  // Create the output files before the run, so an unwritable path fails at once.
  auto rows = RowSink::open(output_file);
  if (!rows.isOk()) return fail(printableText(rows.status().message(), 1000));
  std::optional<AtomicFileWriter> stats_out;
  if (!stats_file.empty()) {
    auto w = AtomicFileWriter::open(stats_file);
    if (!w.isOk()) return fail(printableText(w.status().message(), 1000));
    stats_out.emplace(std::move(w).value());
  }

  std::vector<Prompt> prompts;
  std::vector<SamplingParams> params;
  std::vector<RequestOptions> options;
  for (JsonLineRequest& b : lines) {
    if (!b.request) continue;
    prompts.push_back(std::move(b.request->prompt));
    params.push_back(std::move(b.request->sampling_params));
    options.push_back(std::move(b.request->options));
  }
  std::vector<RequestOutput> outs;
  if (!prompts.empty()) {
    auto r = llm.generate(prompts, params, options);
    if (!r.isOk()) return fail(r.status());
    outs = std::move(r).value();
    if (outs.size() != prompts.size())
      return fail(internalError("generate returned a different number of outputs"));
  }

  size_t failed = 0, next_out = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    json row;
    if (lines[i].request) {
      const RequestOutput& r = outs[next_out++];
      row = resultRow(i, r, name + ":" + std::to_string(lines[i].line));
      if (!r.status.isOk()) ++failed;
    } else {
      row = errorRow(i, lines[i].error.message());
      ++failed;
    }
    if (Status s = rows->write(jsonLine(row)); !s.isOk()) return fail(s);
  }
  if (Status s = rows->finish(); !s.isOk()) return fail(s);

  const std::string stats = jsonLine(statsJson(llm.stats(), lines.size(), failed));
  if (stats_out) {
    Status s = stats_out->write(stats);
    if (s.isOk()) s = stats_out->commit();
    if (!s.isOk()) return fail(s);
  } else {
    std::fprintf(stderr, "llmrt: stats: %s", stats.c_str());
  }
  if (failed > 0)
    std::fprintf(stderr, "llmrt: warning: %zu of %zu requests failed; their rows carry \"error\"\n", failed,
                 lines.size());
  return 0;
}

}  // namespace llmrt::cli
