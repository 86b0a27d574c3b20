// Small public utilities for front ends: logging control and .npy output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "llmrt/status.h"

namespace llmrt {

// Sets the library's log level: "trace", "debug", "info", "warning", "error" or "off".
Status setLogLevelByName(std::string_view name);

// ", did you mean 'x'?" naming the entry of `known` nearest to a misspelt `given` (edit
// distance, case-insensitive; nothing when none is close), else "".
std::string didYouMean(std::string_view given, const std::vector<std::string>& known);

// Text (a message quoting a file or user input) made safe for one line: newlines and tabs escaped
// as \n \t, other control characters and invalid UTF-8 bytes as \xNN, cut to about `max_bytes`.
std::string printableText(std::string_view text, size_t max_bytes = 200);

// Writes float32 data of the given shape as a NumPy .npy file ('<f4', C order).
Status writeNpyFile(const std::string& path, const float* data, const std::vector<int64_t>& shape);

}  // namespace llmrt
