#include "llmrt/util.h"

#include "core/logging.h"
#include "core/names.h"
#include "core/npy.h"

namespace llmrt {

Status setLogLevelByName(std::string_view name) {
  auto level = parseLogLevel(name);
  if (!level) {
    std::string shown = "\"";
    shown.append(name);
    shown += '"';
    return fieldError("logging", "log_level", shown, "one of trace, debug, info, warning, error, off");
  }
  setLogLevel(*level);
  return Status::ok();
}

std::string didYouMean(std::string_view given, const std::vector<std::string>& known) {
  std::vector<std::string_view> views(known.begin(), known.end());
  return didYouMean(given, std::span<const std::string_view>(views));
}

Status writeNpyFile(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  return writeNpyF32(path, data, Shape(shape.begin(), shape.end()));
}

}  // namespace llmrt
