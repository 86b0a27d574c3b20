#include "llmrt/util.h"

#include "core/logging.h"
#include "core/npy.h"

namespace llmrt {

Status setLogLevelByName(std::string_view name) {
  auto level = parseLogLevel(name);
  if (!level)
    return fieldError("logging", "log_level", "\"" + std::string(name) + "\"",
                      "one of trace, debug, info, warning, error, off");
  setLogLevel(*level);
  return Status::ok();
}

Status writeNpyFile(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  return writeNpyF32(path, data, Shape(shape.begin(), shape.end()));
}

}  // namespace llmrt
