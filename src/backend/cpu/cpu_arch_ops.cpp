// CpuBackend ops that only some architectures use: LayerNorm, the MLP activations,
// learned position embeddings, residual adds and soft-capping (float32, the reference).
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_util.h"
#include "core/logging.h"

namespace llmrt {
using cpu::activate;
using cpu::cols;
using cpu::rowStride;
using cpu::rows;

void CpuBackend::layerNorm(const TensorView& x, const TensorView& weight, const TensorView* bias, float eps,
                           TensorView out) {
  const int64_t n = cols(x);
  const float* w = weight.as<const float>();
  const float* b = bias != nullptr ? bias->as<const float>() : nullptr;
  pool_.parallelFor(rows(x), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = x.as<const float>() + r * rowStride(x);
      float* o = out.as<float>() + r * rowStride(out);
      // torch's layer_norm: mean, then the biased variance of the deviations (accumulated
      // wider here; the CUDA kernel's float32 tree sums differ by rounding only).
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) sum += xr[i];
      const float mean = static_cast<float>(sum / static_cast<double>(n));
      double ss = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(xr[i]) - mean;
        ss += d * d;
      }
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
      for (int64_t i = 0; i < n; ++i) o[i] = (xr[i] - mean) * inv * w[i] + (b != nullptr ? b[i] : 0.0f);
    }
  }, 4);
}

void CpuBackend::activation(Activation act, const TensorView& x, TensorView out) {
  if (isRowQuantized(out.dtype)) return writeQuantized(out, [&](TensorView t) { activation(act, x, t); });
  const int64_t n = cols(out);
  pool_.parallelFor(rows(out), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = x.as<const float>() + r * rowStride(x);
      float* o = out.as<float>() + r * rowStride(out);
      for (int64_t i = 0; i < n; ++i) o[i] = activate(act, xr[i]);
    }
  }, 2);
}

void CpuBackend::gatedActivation(Activation act, const TensorView& gate_up, TensorView out) {
  if (isRowQuantized(out.dtype))
    return writeQuantized(out, [&](TensorView t) { gatedActivation(act, gate_up, t); });
  if (act == Activation::kSilu) return siluMul(gate_up, out);
  const int64_t inter = cols(out);
  pool_.parallelFor(rows(out), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* g = gate_up.as<const float>() + r * rowStride(gate_up);
      const float* u = g + inter;
      float* o = out.as<float>() + r * rowStride(out);
      for (int64_t i = 0; i < inter; ++i) o[i] = activate(act, g[i]) * u[i];
    }
  }, 2);
}

void CpuBackend::addPositionEmbedding(const TensorView& table, TensorView x) {
  const int64_t dim = cols(table);
  const size_t esz = dtypeSize(table.dtype);
  pool_.parallelFor(step_.numTokens(), [&](int64_t lo, int64_t hi) {
    std::vector<float> row(static_cast<size_t>(dim));
    for (int64_t i = lo; i < hi; ++i) {
      const auto pos = static_cast<size_t>(step_.positions[static_cast<size_t>(i)]);
      convertToF32(static_cast<const uint8_t*>(table.data) + pos * static_cast<size_t>(dim) * esz, table.dtype,
                   row.data(), static_cast<size_t>(dim));
      float* o = x.as<float>() + i * rowStride(x);
      for (int64_t c = 0; c < dim; ++c) o[c] += row[static_cast<size_t>(c)];
    }
  });
}

void CpuBackend::add(const TensorView& y, TensorView residual) {
  const int64_t n = cols(residual);
  pool_.parallelFor(rows(residual), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* yr = y.as<const float>() + r * rowStride(y);
      float* o = residual.as<float>() + r * rowStride(residual);
      for (int64_t i = 0; i < n; ++i) o[i] += yr[i];
    }
  }, 8);
}

void CpuBackend::scaleSoftcap(TensorView x, float scale, float cap) {
  const int64_t n = cols(x);
  pool_.parallelFor(rows(x), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      float* o = x.as<float>() + r * rowStride(x);
      for (int64_t i = 0; i < n; ++i) {
        float v = o[i] * scale;
        if (cap > 0.0f) v = cap * std::tanh(v / cap);
        o[i] = v;
      }
    }
  }, 8);
}

Status CpuBackend::setAttentionExtras(const AttentionExtras& extras) {
  if (!(extras.logit_softcap >= 0.0f) || !std::isfinite(extras.logit_softcap))
    return invalidArgument("setAttentionExtras: logit_softcap " + strprintf("%g", extras.logit_softcap) +
                           " must be a finite number >= 0");
  for (float s : extras.alibi_slopes)
    if (!std::isfinite(s)) return invalidArgument("setAttentionExtras: ALiBi slopes must be finite");
  extras_ = extras;
  return Status::ok();
}

}  // namespace llmrt
