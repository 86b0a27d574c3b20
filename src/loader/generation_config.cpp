// generation_config.json → GenerationDefaults.
#include <cmath>

#include "core/logging.h"
#include "core/mapped_file.h"
#include "loader/config_parser.h"
#include "loader/json_util.h"

namespace llmrt {

using detail::Json;

namespace {

Status checkRange(std::string_view where, std::string_view field, const std::optional<double>& v, double lo,
                  double hi, bool lo_open, std::string_view expected) {
  if (!v) return Status::ok();
  const bool ok = (lo_open ? *v > lo : *v >= lo) && *v <= hi;
  if (ok) return Status::ok();
  return fieldError(where, field, strprintf("%.17g", *v), expected);
}

Status checkNonNegative(std::string_view where, std::string_view field, const std::optional<int64_t>& v) {
  if (!v || *v >= 0) return Status::ok();
  return fieldError(where, field, std::to_string(*v), "an integer >= 0");
}

Status checkIds(std::string_view where, std::string_view field, const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    if (id < 0) return fieldError(where, field, std::to_string(id), "token ids >= 0");
  }
  return Status::ok();
}

}  // namespace

Result<GenerationDefaults> parseGenerationConfig(std::string_view text, std::string_view where) {
  LLMRT_ASSIGN_OR_RETURN(Json root, detail::parseInputJson(text, where, kHfJsonLimits));
  if (!root.is_object()) {
    return parseError(std::string(where) + ": expected a JSON object; got " + jsonSnippet(root));
  }
  GenerationDefaults g;
  LLMRT_RETURN_IF_ERROR(detail::readBool(root, "do_sample", "do_sample", where, &g.do_sample));
  LLMRT_RETURN_IF_ERROR(detail::readDouble(root, "temperature", "temperature", where, &g.temperature));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "top_k", "top_k", where, &g.top_k));
  LLMRT_RETURN_IF_ERROR(detail::readDouble(root, "top_p", "top_p", where, &g.top_p));
  LLMRT_RETURN_IF_ERROR(detail::readDouble(root, "min_p", "min_p", where, &g.min_p));
  LLMRT_RETURN_IF_ERROR(
      detail::readDouble(root, "repetition_penalty", "repetition_penalty", where, &g.repetition_penalty));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "max_new_tokens", "max_new_tokens", where, &g.max_new_tokens));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "max_length", "max_length", where, &g.max_length));
  LLMRT_RETURN_IF_ERROR(detail::readInt(root, "pad_token_id", "pad_token_id", where, &g.pad_token_id));
  std::optional<std::vector<int64_t>> bos, eos;
  LLMRT_RETURN_IF_ERROR(detail::readIntOrIntList(root, "bos_token_id", "bos_token_id", where, &bos));
  LLMRT_RETURN_IF_ERROR(detail::readIntOrIntList(root, "eos_token_id", "eos_token_id", where, &eos));
  if (bos) g.bos_token_ids = *bos;
  if (eos) g.eos_token_ids = *eos;

  LLMRT_RETURN_IF_ERROR(checkRange(where, "temperature", g.temperature, 0, 1e9, false, "a number >= 0"));
  LLMRT_RETURN_IF_ERROR(checkRange(where, "top_p", g.top_p, 0, 1, true, "a number in (0, 1]"));
  LLMRT_RETURN_IF_ERROR(checkRange(where, "min_p", g.min_p, 0, 1, false, "a number in [0, 1]"));
  LLMRT_RETURN_IF_ERROR(
      checkRange(where, "repetition_penalty", g.repetition_penalty, 0, 1e9, true, "a number > 0"));
  LLMRT_RETURN_IF_ERROR(checkNonNegative(where, "top_k", g.top_k));
  LLMRT_RETURN_IF_ERROR(checkNonNegative(where, "max_new_tokens", g.max_new_tokens));
  LLMRT_RETURN_IF_ERROR(checkNonNegative(where, "max_length", g.max_length));
  LLMRT_RETURN_IF_ERROR(checkNonNegative(where, "pad_token_id", g.pad_token_id));
  LLMRT_RETURN_IF_ERROR(checkIds(where, "bos_token_id", g.bos_token_ids));
  LLMRT_RETURN_IF_ERROR(checkIds(where, "eos_token_id", g.eos_token_ids));
  return g;
}

Result<GenerationDefaults> loadGenerationConfig(const std::string& path) {
  LLMRT_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  return parseGenerationConfig(text, path);
}

}  // namespace llmrt
