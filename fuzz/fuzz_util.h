// What every llmrt fuzzer checks of an error, and its quiet start.
#pragma once

#include <cstdlib>
#include <string>

#include "core/logging.h"
#include "llmrt/status.h"

namespace llmrt::fuzz {

// An error must be a message a user can read: non-empty, one line, at most 4 KB.
inline void checkMessage(const Status& s) {
  const std::string& m = s.message();
  if (m.empty() || m.size() > 4096 || m.find('\n') != std::string::npos) std::abort();
}

// No log lines while fuzzing (they would flood the output).
inline void quiet() { setLogLevel(LogLevel::kOff); }

}  // namespace llmrt::fuzz
