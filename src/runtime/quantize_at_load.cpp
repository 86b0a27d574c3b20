#include "runtime/quantize_at_load.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/logging.h"
#include "core/mapped_file.h"
#include "llmrt/quantize.h"

namespace llmrt {
namespace fs = std::filesystem;

namespace {

// A 64-bit hash of a byte stream, 8 bytes at a time (FNV-1a's multiply on words, then a final
// avalanche): not cryptographic; one multiply per word, so a whole checkpoint can be read.
class Hash64 {
 public:
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      mix(w);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, p + i, n - i);
    mix(tail ^ (static_cast<uint64_t>(n - i) << 56));
  }
  void add(const std::string& s) { add(s.data(), s.size() + 1); }  // (with its terminator)
  void add(uint64_t v) { mix(v); }
  uint64_t value() const {
    uint64_t x = h_;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
  }

 private:
  void mix(uint64_t w) { h_ = ((h_ ^ w) * 0x100000001b3ull) ^ (h_ >> 29); }
  uint64_t h_ = 0xcbf29ce484222325ull;
};

Status addFile(Hash64& h, const std::string& path) {
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
  return ((ec ? fs::path("/tmp") : tmp) / ("llmrt-quantized-" + std::to_string(::geteuid()))).string();
}

}  // namespace

Result<std::string> calibratedCheckpointKey(const EngineConfig& c, const ModelDirectory& source) {
  const QuantizeOptions o = quantizeOptions(c, "");
  Hash64 h;
  h.add(std::string("llmrt quantize at load, v4"));  // (v4: AWQ clips every matrix but q and k)
  h.add(o.method);
  h.add(static_cast<uint64_t>(o.calib_size));
  h.add(static_cast<uint64_t>(o.calib_seq_len));
  h.add(static_cast<uint64_t>(o.awq_group_size));
  h.add(static_cast<uint64_t>(o.awq_clip));
  char alpha[32];
  std::snprintf(alpha, sizeof(alpha), "%.17g", o.method == "smoothquant" ? o.alpha : 0.0);
  h.add(std::string(alpha));
  LLMRT_RETURN_IF_ERROR(addFile(h, o.calib_file));
  // Every file of the model directory, whole: weights, config, tokenizer, chat template and
  // generation defaults (the cached checkpoint carries copies of the others).
  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(source.dir, ec))
    if (e.is_regular_file(ec)) files.push_back(e.path());
  if (ec) return internalError("quantization at load: cannot list " + source.dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    h.add(f.filename().string());
    LLMRT_RETURN_IF_ERROR(addFile(h, f.string()));
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
  fs::create_directories(root, ec);
  if (ec)
    return internalError("quantization cache " + root.string() + ": cannot create it (" + ec.message() +
                         "); set quantization_cache_dir (--quantization-cache-dir) to a writable directory");
  // Only a directory of this user's: another could plant a checkpoint under a key anyone can compute.
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0 || st.st_uid != ::geteuid())
    return failedPrecondition("quantization cache " + root.string() +
                              ": not owned by this user; set quantization_cache_dir (--quantization-cache-dir) to a "
                              "directory of yours");
  if (c.quantization_cache_dir.empty()) fs::permissions(root, fs::perms::owner_all, ec);  // (the default, in /tmp)
  if (fs::exists(dir / ".complete", ec)) return out;
  // Written under a name of this call, renamed into place once complete: a start that dies
  // meanwhile leaves no half checkpoint under the key (its temporary directory stays; any
  // <method>-<key>.tmp-* may be deleted when no llmrt runs).
  static std::atomic<uint64_t> calls{0};
  const fs::path tmp = root / (methodName(c.quantization) + "-" + key + ".tmp-" + std::to_string(::getpid()) + "-" +
                               std::to_string(calls.fetch_add(1)));
  LLMRT_LOG_INFO("[Quantization] %s: calibrating %s on %s (%lld samples); the result is kept in %s",
                 methodName(c.quantization).c_str(), c.model.c_str(), c.calibration_file.c_str(),
                 static_cast<long long>(c.calibration_size), dir.string().c_str());
  const auto t0 = std::chrono::steady_clock::now();
  Result<QuantizeReport> report = quantizeCheckpoint(quantizeOptions(c, tmp.string()));
  if (!report.isOk()) {
    fs::remove_all(tmp, ec);
    return report.status();
  }
  {
    std::ofstream done(tmp / ".complete");
    done << "llmrt " << methodName(c.quantization) << " of " << c.model << "\n";
    done.close();
    if (!done) {
      fs::remove_all(tmp, ec);
      return internalError("quantization cache: cannot write " + (tmp / ".complete").string());
    }
  }
  std::error_code moved;
  fs::rename(tmp, dir, moved);
  if (moved && !fs::exists(dir / ".complete", ec)) {  // (another call may have finished the same key first)
    fs::remove_all(tmp, ec);
    return internalError("quantization cache: cannot move " + tmp.string() + " to " + dir.string() + " (" +
                         moved.message() + ")");
  }
  fs::remove_all(tmp, ec);  // (left when another call's checkpoint took the key first)
  out.made = true;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace llmrt
