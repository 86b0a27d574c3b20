// libFuzzer target: the input bytes are a whole .safetensors file, parsed and
// validated in memory (parseSafetensors). Any result is fine; a crash, a
// sanitizer report, an inconsistent accepted header or an error message that
// is empty, spans lines or runs past 4 KB is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "core/logging.h"
#include "loader/safetensors.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  llmrt::setLogLevel(llmrt::LogLevel::kOff);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto h = llmrt::parseSafetensors(std::span<const uint8_t>(data, size), "fuzz.safetensors");
  if (!h.isOk()) {
    const std::string& m = h.status().message();
    if (m.empty() || m.size() > 4096 || m.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  // Whatever is accepted must be safe to read: every tensor inside the data
  // buffer, sized exactly numel x dtype size, and no two overlapping.
  if (h->data_offset + h->data_bytes != size) std::abort();
  uint64_t cursor = 0;
  for (const llmrt::SafetensorsTensorInfo& t : h->tensors) {
    if (t.end < t.begin || t.end > h->data_bytes) std::abort();
    if (t.nbytes() != static_cast<uint64_t>(t.shape.numel()) * llmrt::dtypeSize(t.dtype)) std::abort();
    if (t.nbytes() == 0) continue;
    if (t.begin < cursor) std::abort();
    cursor = t.end;
    volatile uint8_t sink = data[h->data_offset + t.begin] ^ data[h->data_offset + t.end - 1];
    (void)sink;
  }
  return 0;
}
