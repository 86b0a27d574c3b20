// CpuBackend element-wise ops and matrix products (float32).
#include <cblas.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_util.h"
#include "core/argmax.h"
#include "core/fp8.h"
#include "core/int8.h"

namespace llmrt {
using cpu::cols;
using cpu::rowStride;
using cpu::rows;

Status CpuBackend::beginStep(const StepInputs& inputs) {
  LLMRT_RETURN_IF_ERROR(copyStepInputs(inputs, geometry_, step_));
  if (step_.fed.empty()) return Status::ok();
  if (argmax_tickets_ == 0) return failedPrecondition("beginStep: fed tokens but no argmaxRowsAsync result");
  const std::vector<int32_t>& src = argmax_[(argmax_tickets_ - 1) % 2];
  for (const FedToken& f : step_.fed) {
    if (f.src >= static_cast<int32_t>(src.size()))
      return invalidArgument("beginStep: fed token source " + std::to_string(f.src) + " outside the previous " +
                             std::to_string(src.size()) + " argmax ids");
    // A row whose logits held NaN or +inf has no id (-1); its step is wasted anyway.
    step_.token_ids[static_cast<size_t>(f.row)] = std::max(0, src[static_cast<size_t>(f.src)]);
  }
  return Status::ok();
}

Result<uint64_t> CpuBackend::argmaxRowsAsync(const TensorView& logits) {
  if (logits.dtype != DType::kF32) return invalidArgument("argmaxRowsAsync: logits must be F32");
  const int64_t n = rows(logits), vocab = cols(logits);
  std::vector<int32_t>& out = argmax_[argmax_tickets_ % 2];
  out.assign(static_cast<size_t>(n), -1);
  pool_.parallelFor(n, [&](int64_t b, int64_t e) {
    // (-1, as the CUDA kernel gives, for a row without a greedy token: the host sampler reports it)
    for (int64_t r = b; r < e; ++r)
      out[static_cast<size_t>(r)] =
          static_cast<int32_t>(argmaxFinite(logits.as<const float>() + r * rowStride(logits), vocab));
  });
  return argmax_tickets_++;
}

Status CpuBackend::waitArgmax(uint64_t ticket, int32_t* out) {
  if (ticket >= argmax_tickets_ || ticket + 2 < argmax_tickets_)
    return invalidArgument("waitArgmax: ticket " + std::to_string(ticket) + " is not one of the two most recent");
  const std::vector<int32_t>& src = argmax_[ticket % 2];
  std::copy(src.begin(), src.end(), out);
  return Status::ok();
}

void CpuBackend::embedding(const TensorView& table, TensorView out) {
  const std::vector<int32_t>& ids = step_.token_ids;
  const int64_t dim = cols(table);
  const size_t esz = dtypeSize(table.dtype);
  pool_.parallelFor(static_cast<int64_t>(ids.size()), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const uint8_t* src = static_cast<const uint8_t*>(table.data) + static_cast<size_t>(ids[i]) * dim * esz;
      convertToF32(src, table.dtype, out.as<float>() + i * rowStride(out), static_cast<size_t>(dim));
    }
  });
}

void CpuBackend::writeQuantized(TensorView out, const std::function<void(TensorView)>& op) {
  const int64_t m = rows(out), k = cols(out), ld = rowStride(out);
  quantized_out_tmp_.resize(static_cast<size_t>(m * k));
  op(TensorView(quantized_out_tmp_.data(), DType::kF32, Shape{m, k}));
  float* scales = rowQuantizedScales(out);
  auto* codes = static_cast<uint8_t*>(out.data);
  pool_.parallelFor(m, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* v = quantized_out_tmp_.data() + r * k;
      uint8_t* row = codes + r * ld;
      scales[r] = out.dtype == DType::kI8 ? quantizeInt8Row(v, k, reinterpret_cast<int8_t*>(row)).scale
                                          : quantizeFp8Row(v, k, row).scale;
    }
  }, 1);
}

void CpuBackend::rmsNorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) {
  if (isRowQuantized(out.dtype))
    return writeQuantized(out, [&](TensorView t) { rmsNorm(x, weight, eps, t); });
  const int64_t n = cols(x);
  const float* w = weight.as<const float>();
  pool_.parallelFor(rows(x), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x.as<const float>() + r * rowStride(x);
      float* o = out.as<float>() + r * rowStride(out);
      double ss = 0.0;
      for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      // HF LlamaRMSNorm's x * rsqrt(mean(x^2) + eps) * weight in float32, the products in the
      // CUDA kernel's order, (weight * x) * inv (which with 16-bit outputs also rounds weight * x).
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
      for (int64_t i = 0; i < n; ++i) o[i] = (w[i] * xr[i]) * inv;
    }
  }, 4);
}

void CpuBackend::gatherLogitRows(const TensorView& src, TensorView out) {
  const std::vector<int64_t>& rows_idx = step_.logit_rows;
  const int64_t n = cols(src);
  for (size_t r = 0; r < rows_idx.size(); ++r)
    std::memcpy(out.as<float>() + static_cast<int64_t>(r) * rowStride(out),
                src.as<const float>() + rows_idx[r] * rowStride(src), static_cast<size_t>(n) * sizeof(float));
}

void CpuBackend::linear(const TensorView& x, const TensorView& w, const TensorView* bias, TensorView out) {
  const int64_t m = rows(x), k = cols(x), n = w.shape[0];
  assert(w.shape[1] == k && cols(out) == n);
  if (m == 0) return;
  if (observer_) {
    auto it = weight_names_.find(w.data);
    if (it != weight_names_.end()) observer_(it->second, x);
  }
  assert(!isRowQuantized(x.dtype) || x.dtype == w.dtype);  // (a quantized input: weights of its code type)
  if (w.dtype == DType::kF8E4M3) {
    linearFp8(x, w, bias, out);
    return;
  }
  if (w.dtype == DType::kI8) {
    linearInt8(x, w, bias, out);
    return;
  }
  // out[m, n] = x[m, k] * W[n, k]^T
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0f, x.as<const float>(), static_cast<int>(rowStride(x)), w.as<const float>(), static_cast<int>(k), 0.0f,
              out.as<float>(), static_cast<int>(rowStride(out)));
  if (bias != nullptr) {
    const float* bv = bias->as<const float>();
    for (int64_t r = 0; r < m; ++r) {
      float* o = out.as<float>() + r * rowStride(out);
      for (int64_t i = 0; i < n; ++i) o[i] += bv[i];
    }
  }
}

// W8A8: x's rows quantized (core/fp8.h), the code products summed by OpenBLAS in float32 (they are
// exact: 4-bit by 4-bit significands), then scaled by scale_x * scale_w and the bias added.
void CpuBackend::linearFp8(const TensorView& x, const TensorView& w, const TensorView* bias, TensorView out) {
  const int64_t m = rows(x), k = cols(x), n = w.shape[0];
  const float* codes = w.as<const float>();
  const float* w_scale = codes + n * k;
  fp8_x_.resize(static_cast<size_t>(m * k));
  fp8_x_scale_.resize(static_cast<size_t>(m));
  const bool quantized = x.dtype == DType::kF8E4M3;  // (by the op that wrote x: productInputDtype)
  pool_.parallelFor(m, [&](int64_t b, int64_t e) {
    std::vector<uint8_t> q(static_cast<size_t>(k));
    for (int64_t r = b; r < e; ++r) {
      const uint8_t* codes = q.data();
      if (quantized) {
        codes = static_cast<const uint8_t*>(x.data) + r * rowStride(x);
        fp8_x_scale_[static_cast<size_t>(r)] = rowQuantizedScales(x)[r];
      } else {
        fp8_x_scale_[static_cast<size_t>(r)] =
            quantizeFp8Row(x.as<const float>() + r * rowStride(x), k, q.data()).scale;
      }
      convertToF32(codes, DType::kF8E4M3, fp8_x_.data() + r * k, static_cast<size_t>(k));
    }
  }, 1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0f, fp8_x_.data(), static_cast<int>(k), codes, static_cast<int>(k), 0.0f, out.as<float>(),
              static_cast<int>(rowStride(out)));
  const float* bv = bias != nullptr ? bias->as<const float>() : nullptr;
  pool_.parallelFor(m, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* o = out.as<float>() + r * rowStride(out);
      const float sx = fp8_x_scale_[static_cast<size_t>(r)];
      for (int64_t i = 0; i < n; ++i) o[i] = o[i] * (sx * w_scale[i]) + (bv ? bv[i] : 0.0f);
    }
  }, 1);
}

// W8A8 INT8: x's rows quantized (core/int8.h), the code products summed in int32 (exact), then
// float(sum) * (scale_x * scale_w) + bias, rounded after each operation (the CUDA kernels' order).
void CpuBackend::linearInt8(const TensorView& x, const TensorView& w, const TensorView* bias, TensorView out) {
  const int64_t m = rows(x), k = cols(x), n = w.shape[0];
  const auto* codes = w.as<const int8_t>();
  const float* w_scale = w.as<const float>() + (n * k + 3) / 4;
  int8_x_.resize(static_cast<size_t>(m * k));
  fp8_x_scale_.resize(static_cast<size_t>(m));
  pool_.parallelFor(m, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      if (x.dtype == DType::kI8) {  // quantized by the op that wrote x (productInputDtype)
        std::memcpy(int8_x_.data() + r * k, static_cast<const int8_t*>(x.data) + r * rowStride(x),
                    static_cast<size_t>(k));
        fp8_x_scale_[static_cast<size_t>(r)] = rowQuantizedScales(x)[r];
      } else {
        fp8_x_scale_[static_cast<size_t>(r)] =
            quantizeInt8Row(x.as<const float>() + r * rowStride(x), k, int8_x_.data() + r * k).scale;
      }
    }
  }, 1);
  const float* bv = bias != nullptr ? bias->as<const float>() : nullptr;
  pool_.parallelFor(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int8_t* wr = codes + i * k;
      for (int64_t r = 0; r < m; ++r) {
        const int8_t* xr = int8_x_.data() + r * k;
        int32_t acc = 0;
        for (int64_t j = 0; j < k; ++j) acc += static_cast<int32_t>(xr[j]) * static_cast<int32_t>(wr[j]);
        const float v = static_cast<float>(acc) * (fp8_x_scale_[static_cast<size_t>(r)] * w_scale[i]);
        out.as<float>()[r * rowStride(out) + i] = v + (bv ? bv[i] : 0.0f);
      }
    }
  }, 16);
}

void CpuBackend::linearAdd(const TensorView& x, const TensorView& w, const TensorView* bias, TensorView residual) {
  // The product (bias included) into a temporary, then added: residual + (x W^T + bias).
  const int64_t m = rows(x), n = w.shape[0];
  assert(rows(residual) == m && cols(residual) == n);
  linear_add_tmp_.resize(static_cast<size_t>(m * n));
  TensorView tmp{linear_add_tmp_.data(), DType::kF32, Shape{m, n}};
  linear(x, w, bias, tmp);
  pool_.parallelFor(m, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* out = residual.as<float>() + r * rowStride(residual);
      const float* add = linear_add_tmp_.data() + r * n;
      for (int64_t i = 0; i < n; ++i) out[i] += add[i];
    }
  }, 8);
}

void CpuBackend::siluMul(const TensorView& gate_up, TensorView out) {
  if (isRowQuantized(out.dtype)) return writeQuantized(out, [&](TensorView t) { siluMul(gate_up, t); });
  const int64_t inter = cols(out);
  pool_.parallelFor(rows(out), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* g = gate_up.as<const float>() + r * rowStride(gate_up);
      const float* u = g + inter;
      float* o = out.as<float>() + r * rowStride(out);
      for (int64_t i = 0; i < inter; ++i) o[i] = (g[i] / (1.0f + std::exp(-g[i]))) * u[i];
    }
  }, 2);
}

void CpuBackend::ropeWriteKv(int64_t layer, TensorView q, TensorView k, const TensorView& v, int64_t head_dim) {
  const int64_t half = step_.rotary_dim / 2;
  const int64_t q_heads = cols(q) / head_dim, k_heads = cols(k) / head_dim;
  pool_.parallelFor(step_.numTokens(), [&](int64_t b, int64_t e) {
    std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
    for (int64_t r = b; r < e; ++r) {
      const float pos = static_cast<float>(step_.positions[static_cast<size_t>(r)]);
      const float* inv_freq = step_.inv_freq.data() + step_.row_rope_table[static_cast<size_t>(r)] * half;
      for (int64_t i = 0; i < half; ++i) {
        const float theta = pos * inv_freq[i];  // float32, as HF's inv_freq @ position_ids
        cs[i] = std::cos(theta) * step_.rope_scaling;
        sn[i] = std::sin(theta) * step_.rope_scaling;
      }
      auto rotate = [&](float* row, int64_t heads) {
        for (int64_t h = 0; h < heads; ++h) {
          float* x = row + h * head_dim;
          for (int64_t i = 0; i < half; ++i) {
            const float x1 = x[i], x2 = x[i + half];
            x[i] = x1 * cs[i] - x2 * sn[i];
            x[i + half] = x2 * cs[i] + x1 * sn[i];
          }
        }
      };
      rotate(q.as<float>() + r * rowStride(q), q_heads);
      rotate(k.as<float>() + r * rowStride(k), k_heads);
    }
  });
  // The rotated keys and the values into the cache.
  const int64_t tpb = geometry_.tokens_per_block, hd = geometry_.head_dim, kvh = geometry_.num_kv_heads;
  for (size_t r = 0; r < step_.slots.size(); ++r) {
    const int64_t slot = step_.slots[r];
    if (slot < 0) continue;
    const int64_t block = slot / tpb, off = slot % tpb;
    for (int kv = 0; kv < 2; ++kv) {
      const TensorView& src = kv == 0 ? k : v;
      const float* row = src.as<const float>() + static_cast<int64_t>(r) * rowStride(src);
      for (int64_t h = 0; h < kvh; ++h)
        putKvRow(kvBlockHead(primary_.data(), block, layer, kv, h), off, layer, kv, row + h * hd);
    }
  }
}

}  // namespace llmrt
