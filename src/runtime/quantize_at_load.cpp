#include "runtime/quantize_at_load.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/logging.h"
#include "core/mapped_file.h"
#include "llmrt/quantize.h"

namespace llmrt {
namespace fs = std::filesystem;

namespace {

class Fnv1a {
 public:
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ull;
  }
  void add(const std::string& s) {
    add(s.data(), s.size());
    add("\0", 1);  // (so that "ab" + "c" and "a" + "bc" differ)
  }
  void add(uint64_t v) { add(&v, sizeof(v)); }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

Status addFile(Fnv1a& h, const std::string& path) {
  LLMRT_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(path));
  h.add(static_cast<uint64_t>(f.size()));
  if (f.size() > 0) h.add(f.data(), f.size());
  return Status::ok();
}

std::string methodName(Quantization q) { return std::string(toString(q)); }

QuantizeOptions quantizeOptions(const EngineConfig& c, const std::string& output) {
  QuantizeOptions o;
  o.method = methodName(c.quantization);
  o.model = c.model;
  o.output = output;
  o.calib_file = c.calibration_file;
  o.calib_size = c.calibration_size;
  o.alpha = c.smoothquant_alpha;
  o.num_threads = c.num_threads;
  return o;
}

std::string cacheRoot(const EngineConfig& c) {
  if (!c.quantization_cache_dir.empty()) return c.quantization_cache_dir;
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  return ((ec ? fs::path("/tmp") : tmp) / "llmrt-quantized").string();
}

}  // namespace

Result<std::string> calibratedCheckpointKey(const EngineConfig& c, const ModelDirectory& source) {
  const QuantizeOptions o = quantizeOptions(c, "");
  Fnv1a h;
  h.add(std::string("llmrt quantize at load, v1"));
  h.add(o.method);
  h.add(static_cast<uint64_t>(o.calib_size));
  h.add(static_cast<uint64_t>(o.calib_seq_len));
  h.add(static_cast<uint64_t>(o.awq_group_size));
  char alpha[32];
  std::snprintf(alpha, sizeof(alpha), "%.17g", o.method == "smoothquant" ? o.alpha : 0.0);
  h.add(std::string(alpha));
  LLMRT_RETURN_IF_ERROR(addFile(h, o.calib_file));
  LLMRT_RETURN_IF_ERROR(addFile(h, (fs::path(source.dir) / "config.json").string()));
  constexpr uint64_t kSamples = 64, kSample = 4096;
  for (const SafetensorsFile& f : source.weights.files()) {
    h.add(fs::path(f.path()).filename().string());
    const uint8_t* data = f.mappedData();
    const uint64_t size = f.header().data_offset + f.header().data_bytes;
    h.add(size);
    h.add(data, static_cast<size_t>(f.header().data_offset));  // the header: names, dtypes, shapes, offsets
    const uint64_t body = size - f.header().data_offset;
    if (body <= kSamples * kSample) {
      h.add(data + f.header().data_offset, static_cast<size_t>(body));
      continue;
    }
    for (uint64_t i = 0; i < kSamples; ++i) {
      const uint64_t at = f.header().data_offset + (body - kSample) * i / (kSamples - 1);
      h.add(data + at, kSample);
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h.value()));
  return std::string(hex);
}

Result<CalibratedCheckpoint> calibratedCheckpointFor(const EngineConfig& c, const ModelDirectory& source) {
  if (c.quantization != Quantization::kSmoothQuant && c.quantization != Quantization::kAwq)
    return invalidArgument("quantization at load: " + methodName(c.quantization) + " does not calibrate");
  if (!source.config.weight_quantization.empty())
    return invalidArgument("quantization " + methodName(c.quantization) + ": " + source.dir + " is already a " +
                           source.config.weight_quantization +
                           " checkpoint; load it with quantization auto (its own) or none");
  LLMRT_ASSIGN_OR_RETURN(const std::string key, calibratedCheckpointKey(c, source));
  const fs::path root = cacheRoot(c);
  const fs::path dir = root / (methodName(c.quantization) + "-" + key);
  CalibratedCheckpoint out;
  out.dir = dir.string();
  std::error_code ec;
  if (fs::exists(dir / ".complete", ec)) return out;
  fs::create_directories(root, ec);
  if (ec)
    return internalError("quantization cache " + root.string() + ": cannot create it (" + ec.message() +
                         "); set quantization_cache_dir (--quantization-cache-dir) to a writable directory");
  // Written under a name of this process, renamed into place once complete: a start that dies
  // meanwhile leaves no half checkpoint under the key (and a stale temporary name is removed).
  const fs::path tmp = root / (methodName(c.quantization) + "-" + key + ".tmp-" + std::to_string(::getpid()));
  fs::remove_all(tmp, ec);
  LLMRT_LOG_INFO("[Quantization] %s: calibrating %s on %s (%lld samples); the result is kept in %s",
                 methodName(c.quantization).c_str(), c.model.c_str(), c.calibration_file.c_str(),
                 static_cast<long long>(c.calibration_size), dir.string().c_str());
  const auto t0 = std::chrono::steady_clock::now();
  Result<QuantizeReport> report = quantizeCheckpoint(quantizeOptions(c, tmp.string()));
  if (!report.isOk()) {
    fs::remove_all(tmp, ec);
    return report.status();
  }
  std::ofstream(tmp / ".complete") << "llmrt " << methodName(c.quantization) << " of " << c.model << "\n";
  fs::rename(tmp, dir, ec);
  if (ec && !fs::exists(dir / ".complete")) {  // (another process may have finished the same key first)
    fs::remove_all(tmp, ec);
    return internalError("quantization cache: cannot move " + tmp.string() + " to " + dir.string());
  }
  fs::remove_all(tmp, ec);
  out.made = true;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace llmrt
