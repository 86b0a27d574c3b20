// CudaTuning (include/llmrt/engine_config.h): its key table, validate(), toString() and
// parseCudaTuning. Built into every backend build (the CPU build too), so front ends accept and
// check the same keys whether or not this build has the CUDA backend.
#include <string>
#include <vector>

#include "core/logging.h"
#include "core/names.h"
#include "llmrt/engine_config.h"

namespace llmrt {
namespace {

struct Key {
  std::string_view name;
  bool CudaTuning::*flag = nullptr;    // a switch, or
  int32_t CudaTuning::*number = nullptr;  // an integer in [lo, hi]
  int32_t lo = 0, hi = 0;
};

constexpr Key kKeys[] = {
    {"graphs", &CudaTuning::graphs},
    {"gemv", &CudaTuning::gemv},
    {"flash", &CudaTuning::flash},
    {"mma_decode", &CudaTuning::mma_decode},
    {"rope_fusion", &CudaTuning::rope_fusion},
    {"half_activations", &CudaTuning::half_activations},
    {"pdl", &CudaTuning::pdl},
    {"sampling", &CudaTuning::sampling},
    {"compact_sampling", &CudaTuning::compact_sampling},
    {"row_group_sampling", &CudaTuning::row_group_sampling},
    {"vector_ops", &CudaTuning::vector_ops},
    {"gemv_rows", nullptr, &CudaTuning::gemv_rows, 0, 8},
    {"norm_split_rows", nullptr, &CudaTuning::norm_split_rows, 0, 8},
    {"fp8_gemv_rows", nullptr, &CudaTuning::fp8_gemv_rows, 0, 8},
    {"fp8_row_gemv_rows", nullptr, &CudaTuning::fp8_row_gemv_rows, 0, 2},
    {"fused_quantization", &CudaTuning::fused_quantization},
    {"act_fusion", &CudaTuning::act_fusion},
    {"split_waves", nullptr, &CudaTuning::split_waves, 1, 16},
    {"split_keys", nullptr, &CudaTuning::split_keys, 16, 4096},
    {"custom_all_reduce", &CudaTuning::custom_all_reduce},
    {"tp1_collectives", &CudaTuning::tp1_collectives},
    {"profile", &CudaTuning::profile},
};

std::vector<std::string_view> keyNames() {
  std::vector<std::string_view> names;
  for (const Key& k : kKeys) names.push_back(k.name);
  return names;
}

std::string allKeys() {
  std::string s;
  for (const Key& k : kKeys) s += (s.empty() ? "" : ", ") + std::string(k.name);
  return s;
}

std::optional<bool> parseSwitch(std::string_view v) {
  if (v == "on" || v == "true" || v == "1") return true;
  if (v == "off" || v == "false" || v == "0") return false;
  return std::nullopt;
}

std::optional<int32_t> parseSmallInt(std::string_view v) {
  if (v.empty() || v.size() > 6) return std::nullopt;
  int32_t x = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    x = x * 10 + (c - '0');
  }
  return x;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

Status CudaTuning::validate() const {
  for (const Key& k : kKeys) {
    if (!k.number) continue;
    const int32_t v = this->*k.number;
    if (v < k.lo || v > k.hi)
      return fieldError("CudaTuning", k.name, std::to_string(v), strprintf("an integer in [%d, %d]", k.lo, k.hi));
  }
  return Status::ok();
}

std::string CudaTuning::toString() const {
  const CudaTuning defaults;
  std::string s;
  for (const Key& k : kKeys) {
    std::string item;
    if (k.flag && this->*k.flag != defaults.*k.flag) item = std::string(k.name) + (this->*k.flag ? "=on" : "=off");
    if (k.number && this->*k.number != defaults.*k.number)
      item = std::string(k.name) + "=" + std::to_string(this->*k.number);
    if (!item.empty()) s += (s.empty() ? "" : ",") + item;
  }
  return s;
}

Status parseCudaTuning(std::string_view spec, CudaTuning& out) {
  constexpr std::string_view kWhere = "cuda_tuning";
  CudaTuning t = out;
  std::vector<std::string_view> seen;
  const std::vector<std::string_view> names = keyNames();
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return invalidArgument(strprintf("%s: '%.*s' is not key=value (keys: %s)", kWhere.data(),
                                       static_cast<int>(std::min<size_t>(item.size(), 80)), item.data(),
                                       allKeys().c_str()));
    const std::string_view key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    const Key* k = nullptr;
    for (const Key& c : kKeys)
      if (c.name == key) k = &c;
    const std::string shown_key(key.substr(0, 80));
    if (k == nullptr)
      return invalidArgument(std::string(kWhere) + ": unknown key '" + shown_key + "'" + didYouMean(key, names) +
                             " (keys: " + allKeys() + ")");
    for (std::string_view s : seen)
      if (s == key) return invalidArgument(std::string(kWhere) + ": key '" + shown_key + "' given twice");
    seen.push_back(k->name);
    std::string shown_value = "'";
    shown_value.append(value.substr(0, 80));
    shown_value += '\'';
    if (k->flag) {
      std::optional<bool> b = parseSwitch(value);
      if (!b) return fieldError(kWhere, k->name, shown_value, "on or off");
      t.*k->flag = *b;
    } else {
      std::optional<int32_t> n = parseSmallInt(value);
      if (!n || *n < k->lo || *n > k->hi)
        return fieldError(kWhere, k->name, shown_value, strprintf("an integer in [%d, %d]", k->lo, k->hi));
      t.*k->number = *n;
    }
  }
  out = t;
  return Status::ok();
}

}  // namespace llmrt
