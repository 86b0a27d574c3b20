// CudaBackend ops, host side: beginStep (the packing and upload are StepUploader's), argument
// checks, kernel launches (cuda_ops.cu, cuda_gemv.cu, cuda_attention.cu) and cuBLAS matrix products.
#include <cassert>
#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_flash_attention.h"
#include "core/fp8.h"
#include "core/logging.h"

namespace llmrt {
namespace {

int64_t rows(const TensorView& t) { return t.shape.rank() >= 2 ? t.shape[0] : 1; }
int64_t cols(const TensorView& t) { return t.shape[t.shape.rank() - 1]; }
bool isHalf(DType d) { return d == DType::kBF16 || d == DType::kF16; }
// Rows as a power-of-two bucket, so one profile line covers a range of batch sizes.
long long rowBucket(int64_t m) {
  long long b = 1;
  while (b < m) b *= 2;
  return b;
}
int64_t ld(const TensorView& t) { return t.shape.rank() >= 2 ? t.strides[0] : cols(t); }
float* f32(const TensorView& t) { return static_cast<float*>(t.data); }

}  // namespace

bool CudaBackend::checkDtypes(const char* what, const TensorView& t, DType want) {
  if (t.dtype == want) return true;
  fail(invalidArgument(std::string(what) + ": dtype " + std::string(dtypeName(t.dtype)) + ", expected " + std::string(dtypeName(want))));
  return false;
}

bool CudaBackend::checkActivation(const char* what, const TensorView& t) {
  if (t.dtype == DType::kF32 || t.dtype == DType::kBF16 || t.dtype == DType::kF16) return true;
  fail(invalidArgument(std::string(what) + ": dtype " + std::string(dtypeName(t.dtype)) +
                       ", expected F32, BF16 or F16"));
  return false;
}

Status CudaBackend::beginStep(const StepInputs& inputs) {
  if (failed()) return error_;
  LLMRT_RETURN_IF_ERROR(step_.plan(inputs, kv_.geometry(), tuning().flash,
                                   static_cast<int64_t>(tuning().split_waves) * num_sms_,
                                   tuning().split_keys));
  cuda::ResultTokens fed_src;  // the latest argmax or sampling result
  if (!step_.host().fed.empty()) {
    LLMRT_ASSIGN_OR_RETURN(fed_src, results_.latestTokens(step_.maxFedSource(), "beginStep (fed tokens)"));
  }
  if (!reserve(step_.deviceBuffer(), step_.deviceBytes())) return error_;
  LLMRT_RETURN_IF_ERROR(step_.upload(fed_src, stream_.get()));
  LLMRT_RETURN_IF_ERROR(timer_.open(stream_.get()));  // (after the upload: the host's packing is not device time)
  return step_.finish(stream_.get());
}

void CudaBackend::embedding(const TensorView& table, TensorView out) {
  if (failed() || step_.host().token_ids.empty()) return;
  OpScope scope(this, [&] { return std::string("embedding"); });
  if (!checkDtypes("embedding out", out, DType::kF32)) return;
  LLMRT_CUDA_OP_CHECK(cuda::embedding(table.data, table.dtype, cols(table), step_.dev().token_ids,
                                      step_.host().numTokens(), f32(out), ld(out), stream_.get()));
}

void CudaBackend::rmsNorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) {
  if (failed()) return;
  OpScope scope(this,
                [&] { return std::string(isRowQuantized(out.dtype) ? "rmsNorm+quantize" : "rmsNorm"); });
  if (!checkDtypes("rmsNorm", x, DType::kF32) || !checkDtypes("rmsNorm weight", weight, DType::kF32)) return;
  if (isRowQuantized(out.dtype)) {
    writeQuantized(
        "rmsNorm", out,
        [&] {
          return cuda::rmsNormQuantize(f32(x), ld(x), f32(weight), eps, rows(x), cols(x), activation_dtype_,
                                       out.dtype, static_cast<uint8_t*>(out.data), ld(out),
                                       rowQuantizedScales(out), stream_.get());
        },
        [&](void* tmp) {
          return cuda::rmsNorm(f32(x), ld(x), f32(weight), eps, rows(x), cols(x), tmp, activation_dtype_,
                               ld(out), stream_.get());
        });
    return;
  }
  if (!checkActivation("rmsNorm out", out)) return;
  LLMRT_CUDA_OP_CHECK(
      cuda::rmsNorm(f32(x), ld(x), f32(weight), eps, rows(x), cols(x), out.data, out.dtype, ld(out), stream_.get()));
}

DType CudaBackend::productInputDtype(const TensorView& w) const {
  const int64_t k = w.shape.rank() == 2 ? w.shape[1] : 0;
  if (tuning().fused_quantization && isRowQuantized(w.dtype) && k % 8 == 0 &&
      k <= cuda::kQuantizedInputMaxFeatures)
    return w.dtype;
  return activation_dtype_;
}

void CudaBackend::writeQuantized(const char* what, TensorView out, const std::function<cudaError_t()>& fused,
                                 const std::function<cudaError_t(void* tmp)>& op) {
  if (out.shape.rank() != 2 || ld(out) != cols(out)) {
    fail(invalidArgument(std::string(what) +
                         ": a row-quantized output must be a contiguous [rows, cols] view"));
    return;
  }
  const cudaError_t e = fused();
  if (e != cudaErrorNotSupported) {
    LLMRT_CUDA_OP_CHECK(e);
    return;
  }
  const int64_t m = rows(out), k = cols(out);
  if (!reserve(half_x_, static_cast<size_t>(m * ld(out)) * dtypeSize(activation_dtype_))) return;
  LLMRT_CUDA_OP_CHECK(op(half_x_.get()));
  LLMRT_CUDA_OP_CHECK(cuda::w8a8QuantizeRows(out.dtype, half_x_.get(), activation_dtype_, ld(out), m, k,
                                             static_cast<uint8_t*>(out.data), rowQuantizedScales(out),
                                             stream_.get()));
}

void CudaBackend::gatherLogitRows(const TensorView& src, TensorView out) {
  if (failed() || step_.host().logit_rows.empty()) return;
  OpScope scope(this, [&] { return std::string("gatherLogitRows"); });
  if (!checkDtypes("gatherLogitRows src", src, DType::kF32) || !checkDtypes("gatherLogitRows out", out, DType::kF32))
    return;
  LLMRT_CUDA_OP_CHECK(cuda::gatherRows(f32(src), ld(src), step_.dev().logit_rows,
                                       static_cast<int64_t>(step_.host().logit_rows.size()), cols(src), f32(out),
                                       ld(out), stream_.get()));
}

void CudaBackend::siluMul(const TensorView& gate_up, TensorView out) {
  if (failed()) return;
  OpScope scope(this,
                [&] { return std::string(isRowQuantized(out.dtype) ? "siluMul+quantize" : "siluMul"); });
  if (!checkActivation("siluMul in", gate_up)) return;
  if (isRowQuantized(out.dtype)) {
    writeQuantized(
        "siluMul", out,
        [&] {
          return cuda::siluMulQuantize(gate_up.data, gate_up.dtype, ld(gate_up), rows(out), cols(out),
                                       activation_dtype_, out.dtype, static_cast<uint8_t*>(out.data), ld(out),
                                       rowQuantizedScales(out), stream_.get());
        },
        [&](void* tmp) {
          return cuda::siluMul(gate_up.data, gate_up.dtype, ld(gate_up), rows(out), cols(out), tmp,
                               activation_dtype_, ld(out), stream_.get());
        });
    return;
  }
  if (!checkActivation("siluMul out", out)) return;
  LLMRT_CUDA_OP_CHECK(cuda::siluMul(gate_up.data, gate_up.dtype, ld(gate_up), rows(out), cols(out), out.data,
                                    out.dtype, ld(out), stream_.get()));
}

// Steps of up to norm_split_rows rows (CudaTuning) that the matrix-vector kernel serves (gemv_rows: so the
// three ops' products are that kernel too and the bits agree): two matrix-vector launches with the
// norm split over them (cuda::GemvNormOut on the residual product, GemvNormIn on the next), no norm
// kernel between them; `normed` holds g * residual (unscaled). The same bits as the three ops
// (cuda_kernels.h).
// Everything else: linearAdd, rmsNorm, linear.
void CudaBackend::linearAddNormLinear(const TensorView& x, const TensorView& w1, const TensorView* b1,
                                      TensorView residual, const TensorView& norm_weight, float eps, TensorView normed,
                                      const TensorView& w2, const TensorView* b2, TensorView out) {
  if (failed()) return;
  const int64_t m = rows(x), h = cols(residual), n = w2.shape[0];
  auto operand = [&](const TensorView& t, const TensorView& w) { return t.dtype == DType::kF32 || t.dtype == w.dtype; };
  const CudaTuning& t = tuning();
  const bool split = m <= t.norm_split_rows && m <= t.gemv_rows && t.gemv && isHalf(w1.dtype) &&
                     w2.dtype == w1.dtype && residual.dtype == DType::kF32 && norm_weight.dtype == DType::kF32 && operand(x, w1) &&
                     operand(normed, w2) && operand(out, w2) && rows(residual) == m && rows(normed) == m &&
                     cols(normed) == h && w1.shape[0] == h && w2.shape[1] == h &&
                     cuda::gemvSupported(x.data, x.dtype, ld(x), m, cols(x)) &&
                     cuda::gemvSupported(normed.data, normed.dtype, ld(normed), m, h);
  if (!split || m == 0) {
    Backend::linearAddNormLinear(x, w1, b1, residual, norm_weight, eps, normed, w2, b2, out);
    return;
  }
  assert(w1.shape[1] == cols(x) && cols(out) == n);
  const int64_t parts = (h + cuda::kGemvNormGroup - 1) / cuda::kGemvNormGroup;
  if (!reserve(norm_sums_, static_cast<size_t>(m * parts) * sizeof(float))) return;
  {
    OpScope scope(this, [&] {
      return strprintf("linearAdd+norm gemv m<=%lld n=%lld k=%lld", rowBucket(m), static_cast<long long>(h),
                       static_cast<long long>(cols(x)));
    });
    const cuda::GemvNormOut no{f32(norm_weight), normed.data, normed.dtype != DType::kF32, ld(normed),
                               static_cast<float*>(norm_sums_.get())};
    LLMRT_CUDA_OP_CHECK(cuda::gemv(x.data, x.dtype, ld(x), w1.data, w1.dtype, m, cols(x), h, b1 ? f32(*b1) : nullptr,
                                   residual.data, DType::kF32, ld(residual), true, stream_.get(), nullptr, &no));
  }
  OpScope scope(this, [&] {
    return strprintf("norm+linear gemv m<=%lld n=%lld k=%lld", rowBucket(m), static_cast<long long>(n),
                     static_cast<long long>(h));
  });
  const cuda::GemvNormIn ni{static_cast<const float*>(norm_sums_.get()), parts, eps};
  LLMRT_CUDA_OP_CHECK(cuda::gemv(normed.data, normed.dtype, ld(normed), w2.data, w2.dtype, m, h, n,
                                 b2 ? f32(*b2) : nullptr, out.data, out.dtype, ld(out), false, stream_.get(), &ni));
}

void CudaBackend::linear(const TensorView& x, const TensorView& w, const TensorView* bias, TensorView out) {
  product(x, w, bias, out, false);
}

void CudaBackend::linearAdd(const TensorView& x, const TensorView& w, const TensorView* bias, TensorView residual) {
  if (failed()) return;
  if (!checkDtypes("linearAdd residual", residual, DType::kF32)) return;
  product(x, w, bias, residual, true);
}

// The residual add rides in the product: cuBLAS's beta = 1 (out = x W^T + out, one rounding of
// the float32 sum, as a product into a temporary followed by an add; with float32 activations'
// hi + lo parts, (out + x_hi W^T) + x_lo W^T), the matrix-vector kernel's store (out + (x W^T + bias),
// the CPU's order). On the cuBLAS paths a bias comes after: (out + x W^T) + bias; no Llama-family
// model has a bias on the products whose output is added to the residual (o, down).
void CudaBackend::product(const TensorView& x, const TensorView& w, const TensorView* bias, TensorView out,
                          bool accumulate) {
  if (failed()) return;
  const int64_t m = rows(x), k = cols(x), n = w.shape[0];
  assert(w.shape[1] == k && cols(out) == n);
  if (m == 0) return;
  if (isRowQuantized(w.dtype)) {
    if ((!isRowQuantized(x.dtype) && !checkActivation("linear x", x)) || !checkActivation("linear out", out))
      return;
    productW8a8(x, w, bias, out, accumulate);
    return;
  }
  if (!checkActivation("linear x", x) || !checkActivation("linear out", out)) return;
  if (w.dtype == DType::kU8) {
    productInt4(x, w, bias, out, accumulate);
    return;
  }
  const bool half_w = isHalf(w.dtype);
  const bool gemv =
      half_w && tuning().gemv && m <= tuning().gemv_rows && cuda::gemvSupported(x.data, x.dtype, ld(x), m, k);
  OpScope scope(this, [&] {
    return strprintf("%s %s m<=%lld n=%lld k=%lld", accumulate ? "linearAdd" : "linear", gemv ? "gemv" : "cublasLt",
                     rowBucket(m), static_cast<long long>(n), static_cast<long long>(k));
  });
  const float one = 1.0f, zero = 0.0f;
  const float* bias_ptr = bias ? f32(*bias) : nullptr;
  // Row-major out[m, n] = x[m, k] W[n, k]^T is column-major out^T[n, m] = W^T x^T:
  // W (row-major [n, k]) is a column-major [k, n] matrix used transposed.
  if (w.dtype == DType::kF32) {
    if (!checkDtypes("linear x (f32 weights)", x, DType::kF32) || !checkDtypes("linear out", out, DType::kF32))
      return;
    LLMRT_CUBLAS_OP_CHECK(cublasSgemm(cublas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n),
                                      static_cast<int>(m), static_cast<int>(k), &one, f32(w),
                                      static_cast<int>(k), f32(x), static_cast<int>(ld(x)),
                                      accumulate ? &one : &zero, f32(out), static_cast<int>(ld(out))));
  } else if (half_w) {
    // A 16-bit x or out must be of the weights' type (the products take one operand type).
    if ((x.dtype != DType::kF32 && !checkDtypes("linear x", x, w.dtype)) ||
        (out.dtype != DType::kF32 && !checkDtypes("linear out", out, w.dtype)))
      return;
    if (gemv) {
      // Decode-sized: the bandwidth-bound kernel, bias included.
      LLMRT_CUDA_OP_CHECK(cuda::gemv(x.data, x.dtype, ld(x), w.data, w.dtype, m, k, n, bias_ptr, out.data,
                                     out.dtype, ld(out), accumulate, stream_.get()));
      return;
    }
    // 16-bit x 16-bit (the weights' type, H) with fp32 accumulation. A float32 x is rounded to H
    // first; with float32 activations (the accurate mode: a float32 KV cache) it is split into
    // H hi + lo parts and the two products are summed (out = W hi + W lo), so x keeps ~16 bits
    // (bf16) for twice the FLOPs.
    const void* xb = x.data;
    int64_t ldxb = ld(x);
    const bool split = x.dtype == DType::kF32 && activation_dtype_ == DType::kF32 && out.dtype == DType::kF32;
    void* x_lo = nullptr;
    if (x.dtype == DType::kF32) {
      if (!reserve(half_x_, static_cast<size_t>(m * k) * (split ? 4 : 2))) return;
      if (split) {
        x_lo = static_cast<uint8_t*>(half_x_.get()) + static_cast<size_t>(m * k) * 2;
        LLMRT_CUDA_OP_CHECK(cuda::splitToHalf(f32(x), ld(x), m, k, half_x_.get(), x_lo, w.dtype, stream_.get()));
      } else {
        LLMRT_CUDA_OP_CHECK(cuda::toHalf(f32(x), ld(x), m, k, half_x_.get(), w.dtype, stream_.get()));
      }
      xb = half_x_.get();
      ldxb = k;
    }
    const cudaDataType_t in_type = w.dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
    const cudaDataType_t out_type = out.dtype == DType::kF32 ? CUDA_R_32F : in_type;
    // A plan per shape (cuBLASLt); cublasGemmEx where cuBLASLt has no algorithm for it.
    for (const void* part : {xb, static_cast<const void*>(x_lo)}) {
      if (part == nullptr) break;
      const bool add = accumulate || part != xb;  // (the lo part adds to the hi part's product)
      const cublasStatus_t lt = lt_.run(in_type, w.data, part, ldxb, out.data, out_type, m, n, k, ld(out),
                                        cublas_ws_.get(), cublas_ws_.bytes(), stream_.get(), add);
      if (lt != CUBLAS_STATUS_SUCCESS) {
        LLMRT_CUBLAS_OP_CHECK(cublasGemmEx(
            cublas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &one,
            w.data, in_type, static_cast<int>(k), part, in_type, static_cast<int>(ldxb), add ? &one : &zero,
            out.data, out_type, static_cast<int>(ld(out)), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      }
    }
  } else {
    fail(invalidArgument("linear: weight dtype " + std::string(dtypeName(w.dtype)) + " is not F32, BF16 or F16"));
    return;
  }
  if (bias_ptr != nullptr)
    LLMRT_CUDA_OP_CHECK(cuda::addBias(out.data, out.dtype, ld(out), bias_ptr, m, n, stream_.get()));
}

// 4-bit weights (loadInt4Weight): the W4A16 matrix-vector kernel for decode-sized steps (bias
// and residual add in its store), else the weight dequantized into int4_w_ in the weights' dtype
// and the 16-bit product on it.
void CudaBackend::productInt4(const TensorView& x, const TensorView& w, const TensorView* bias, TensorView out,
                              bool accumulate) {
  const int64_t m = rows(x), k = cols(x), n = w.shape[0];
  auto it = int4_weights_.find(w.data);
  if (it == int4_weights_.end()) {
    fail(invalidArgument("linear: a U8 weight that loadInt4Weight did not make"));
    return;
  }
  const Int4Weight& meta = it->second;
  const auto* base = static_cast<const uint8_t*>(w.data);
  const auto* codes = reinterpret_cast<const uint32_t*>(base);
  const auto* scales = reinterpret_cast<const float*>(base + meta.scales_at);
  const auto* zeros = reinterpret_cast<const float*>(base + meta.zeros_at);
  if (accumulate && out.dtype != DType::kF32) {
    fail(invalidArgument("linearAdd (int4): the residual must be F32"));
    return;
  }
  if (tuning().gemv && cuda::int4GemvSupported(m, k, meta.group, x.data, x.dtype, ld(x))) {
    OpScope scope(this, [&] {
      return strprintf("%s int4 gemv m<=%lld n=%lld k=%lld", accumulate ? "linearAdd" : "linear", rowBucket(m),
                       static_cast<long long>(n), static_cast<long long>(k));
    });
    LLMRT_CUDA_OP_CHECK(cuda::int4Gemv(x.data, x.dtype, ld(x), m, codes, scales, zeros, n, k, meta.group,
                                       bias ? f32(*bias) : nullptr, out.data, out.dtype, ld(out), accumulate,
                                       stream_.get()));
    return;
  }
  const DType wt = options_.weight_dtype;
  if (!reserve(int4_w_, static_cast<size_t>(n * k) * dtypeSize(wt))) return;
  {
    OpScope scope(this, [&] {
      return strprintf("int4 dequantize n=%lld k=%lld", static_cast<long long>(n), static_cast<long long>(k));
    });
    LLMRT_CUDA_OP_CHECK(cuda::int4Dequantize(codes, scales, zeros, n, k, meta.group, int4_w_.get(), wt, stream_.get()));
  }
  product(x, TensorView(int4_w_.get(), wt, Shape{n, k}, Device::kCuda, options_.device), bias, out, accumulate);
}

// 8-bit weights (loadQuantizedWeight): x's rows quantized (codes and row scales into fp8_x_; or
// already, by the op that wrote x: productInputDtype), then
// the tensor-core matrix-vector kernel for decode-sized steps, else cuBLASLt's 8-bit GEMM: FP8 with
// both scale vectors in its epilogue; INT8, and FP8 where cuBLASLt refuses outer-vector scaling,
// its unscaled sums and a scaling kernel. Bias after the product on the scaled-GEMM path, as for
// 16-bit weights; in the scaling kernels everywhere else.
void CudaBackend::productW8a8(const TensorView& x, const TensorView& w, const TensorView* bias, TensorView out,
                              bool accumulate) {
  const int64_t m = rows(x), k = cols(x), n = w.shape[0];
  const DType codes_dt = w.dtype;
  const bool int8 = codes_dt == DType::kI8;
  const char* kind = int8 ? "int8" : "fp8";
  const bool gemv = m <= tuning().fp8_gemv_rows && cuda::w8a8GemvSupported(m, k);
  if (!gemv && k % 16 != 0) {
    fail(unimplemented(strprintf("linear (%s): in_features %lld is not a multiple of 16, which 8-bit products "
                                 "need; use quantization none",
                                 kind, static_cast<long long>(k))));
    return;
  }
  if (accumulate && out.dtype != DType::kF32) {
    fail(invalidArgument(std::string("linearAdd (") + kind + "): the residual must be F32"));
    return;
  }
  const float* sw = fp8RowScales(w);
  const float* bias_ptr = bias ? f32(*bias) : nullptr;
  const auto* wq = static_cast<const uint8_t*>(w.data);
  const uint8_t* q = nullptr;
  const float* sx = nullptr;
  if (isRowQuantized(x.dtype)) {  // quantized by the op that wrote it (productInputDtype)
    if (x.dtype != codes_dt || ld(x) != k) {
      fail(invalidArgument(strprintf("linear (%s): a quantized input must hold contiguous %s codes, not %s",
                                     kind, std::string(dtypeName(codes_dt)).c_str(),
                                     std::string(dtypeName(x.dtype)).c_str())));
      return;
    }
    q = static_cast<const uint8_t*>(x.data);
    sx = rowQuantizedScales(x);
  } else {  // into fp8_x_: the codes, then the row scales (rowQuantizedScales' layout)
    if (!reserve(fp8_x_, static_cast<size_t>(rowQuantizedScalesOffset(m, k) + m * 4))) return;
    auto* qx = static_cast<uint8_t*>(fp8_x_.get());
    auto* sxx = reinterpret_cast<float*>(qx + rowQuantizedScalesOffset(m, k));
    OpScope scope(this, [&] {
      return strprintf("%s quantize m<=%lld k=%lld", kind, rowBucket(m), static_cast<long long>(k));
    });
    LLMRT_CUDA_OP_CHECK(
        cuda::w8a8QuantizeRows(codes_dt, x.data, x.dtype, ld(x), m, k, qx, sxx, stream_.get()));
    q = qx;
    sx = sxx;
  }
  OpScope scope(this, [&] {
    return strprintf("%s %s %s m<=%lld n=%lld k=%lld", accumulate ? "linearAdd" : "linear", kind,
                     gemv ? "gemv" : "cublasLt", rowBucket(m), static_cast<long long>(n), static_cast<long long>(k));
  });
  if (gemv) {
    LLMRT_CUDA_OP_CHECK(cuda::w8a8Gemv(codes_dt, q, sx, m, k, wq, sw, n, bias_ptr, out.data, out.dtype,
                                       ld(out), accumulate, stream_.get(), tuning().fp8_row_gemv_rows));
    return;
  }
  const cudaDataType_t out_type =
      out.dtype == DType::kF32 ? CUDA_R_32F : (out.dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F);
  // cuBLASLt's 8-bit GEMMs write rows that start on 16-byte boundaries and need n % 16 == 0; other
  // products take the sums path over the weight's rows padded to 16 (loadQuantizedWeight).
  const int64_t n_pad = fp8PaddedRows(n);
  // Outer-vector scaling takes FP8 and 16-bit outputs only (cuBLASLt 13: CUBLAS_STATUS_INVALID_VALUE
  // for a float32 D), so float32 outputs, residual adds and INT8 take the sums path.
  const bool aligned = n == n_pad && (static_cast<size_t>(ld(out)) * dtypeSize(out.dtype)) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(out.data) % 16 == 0;
  if (!int8 && fp8_scaled_gemm_ && aligned && out.dtype != DType::kF32 && !accumulate) {
    const cublasStatus_t st = lt_.runW8a8(CUDA_R_8F_E4M3, wq, sw, q, sx, out.data, out_type, m, n, k, ld(out),
                                          cublas_ws_.get(), cublas_ws_.bytes(), stream_.get(), accumulate);
    if (st != CUBLAS_STATUS_NOT_SUPPORTED && st != CUBLAS_STATUS_INVALID_VALUE) {
      LLMRT_CUBLAS_OP_CHECK(st);
      if (bias_ptr != nullptr)
        LLMRT_CUDA_OP_CHECK(cuda::addBias(out.data, out.dtype, ld(out), bias_ptr, m, n, stream_.get()));
      return;
    }
    fp8_scaled_gemm_ = false;
    LLMRT_LOG_INFO("cuBLASLt has no FP8 GEMM with outer-vector scales here: FP8 products scale their sums in a "
                   "kernel of their own");
  }
  // The unscaled sums in bands of rows that fit kW8a8SumsBytes (reserveWorkspace sets it aside, so
  // recorded steps never grow it).
  const int64_t ld_sums = n_pad;
  const int64_t band = std::max<int64_t>(1, std::min<int64_t>(m, kW8a8SumsBytes / (ld_sums * 4)));
  if (!reserve(fp8_sums_, static_cast<size_t>(band * ld_sums) * sizeof(float))) return;
  void* sums = fp8_sums_.get();
  const size_t out_row_bytes = static_cast<size_t>(ld(out)) * dtypeSize(out.dtype);
  for (int64_t r0 = 0; r0 < m; r0 += band) {
    const int64_t rows_now = std::min(band, m - r0);
    LLMRT_CUBLAS_OP_CHECK(lt_.runW8a8(int8 ? CUDA_R_8I : CUDA_R_8F_E4M3, wq, nullptr, q + r0 * k, nullptr, sums,
                                      int8 ? CUDA_R_32I : CUDA_R_32F, rows_now, n_pad, k, ld_sums, cublas_ws_.get(),
                                      cublas_ws_.bytes(), stream_.get(), false));
    LLMRT_CUDA_OP_CHECK(cuda::w8a8ScaleOut(codes_dt, sums, ld_sums, rows_now, n, sx + r0, sw, bias_ptr,
                                           static_cast<uint8_t*>(out.data) + static_cast<size_t>(r0) * out_row_bytes,
                                           out.dtype, ld(out), accumulate, stream_.get()));
  }
}

void CudaBackend::ropeWriteKv(int64_t layer, TensorView q, TensorView k, const TensorView& v, int64_t head_dim) {
  if (failed() || step_.host().token_ids.empty()) return;
  OpScope scope(this, [&] { return std::string("ropeWriteKv"); });
  if (!checkDtypes("ropeWriteKv q", q, DType::kF32) || !checkDtypes("ropeWriteKv k", k, DType::kF32) ||
      !checkDtypes("ropeWriteKv v", v, DType::kF32))
    return;
  cuda::RopeKvArgs a{};
  a.q = f32(q);
  a.ld_q = ld(q);
  a.q_heads = cols(q) / head_dim;
  a.k = f32(k);
  a.ld_k = ld(k);
  a.v = f32(v);
  a.ld_v = ld(v);
  a.layer = layer;
  const DeviceStep& dev = step_.dev();
  a.positions = dev.positions;
  a.row_table = dev.row_table;
  a.slots = dev.slots;
  a.inv_freq = dev.inv_freq;
  a.half = step_.host().rotary_dim / 2;
  a.scaling = step_.host().rope_scaling;
  a.rows = step_.host().numTokens();
  a.k_inverse = Fp8KvScale::of(kv_.scale(layer, 0)).inverse;  // (1 but for an FP8 cache)
  a.v_inverse = Fp8KvScale::of(kv_.scale(layer, 1)).inverse;
  LLMRT_CUDA_OP_CHECK(cuda::ropeWriteKv(kv_.primary(), kv_.geometry().dtype, kv_.layout(), a, stream_.get()));
}

bool CudaBackend::checkAttention(const TensorView& q, int64_t num_heads, int64_t sliding_window,
                                 const TensorView& out) {
  const int64_t kv_heads = kv_.geometry().num_kv_heads;
  if (num_heads % kv_heads != 0) {
    fail(invalidArgument("attention: " + std::to_string(num_heads) + " heads over " + std::to_string(kv_heads) +
                         " KV heads; the query heads must be a multiple of the KV heads"));
    return false;
  }
  // The kernels read keys from the row's window start only, so released blocks (kNoKvBlock)
  // below the step's attention_window are never loaded; a wider window would load them.
  if (!step_.host().windowCovered(sliding_window)) {
    fail(invalidArgument("attention: sliding_window " + std::to_string(sliding_window) +
                         " (0 = full) would read released KV blocks; the step's block tables are valid only "
                         "for windows in [1, " +
                         std::to_string(step_.host().attention_window) + "] (StepInputs::attention_window)"));
    return false;
  }
  if (!extras_.alibi_slopes.empty() && static_cast<int64_t>(extras_.alibi_slopes.size()) != num_heads) {
    fail(invalidArgument("attention: " + std::to_string(extras_.alibi_slopes.size()) +
                         " ALiBi slopes (setAttentionExtras) for " + std::to_string(num_heads) +
                         " heads; expected one per head"));
    return false;
  }
  return checkDtypes("attention q", q, DType::kF32) && checkActivation("attention out", out);
}

// What both attention kernels' arguments take: the packed q / out, heads, scale, layer, the
// step's sequences and the model's extras (soft-capping, ALiBi: every kernel takes them).
template <typename Args>
void commonAttnArgs(Args& a, int64_t layer, const TensorView& q, int64_t num_heads, float scale, const TensorView& out,
                    const cuda::AttnSeqDev* seqs, const int32_t* tables, const cuda::AttnExtras& extras) {
  a.q = f32(q);
  a.ld_q = ld(q);
  a.out = out.data;
  a.out_dtype = out.dtype;
  a.ld_out = ld(out);
  a.num_heads = static_cast<int32_t>(num_heads);
  a.scale = scale;
  a.layer = static_cast<int32_t>(layer);
  a.seqs = seqs;
  a.tables = tables;
  a.extras = extras;
}

cuda::DecodeAttnArgs CudaBackend::decodeArgs(int64_t layer, const TensorView& q, int64_t num_heads,
                                             int64_t sliding_window, float scale, const TensorView& out) const {
  const DeviceStep& dev = step_.dev();
  cuda::DecodeAttnArgs a{};
  commonAttnArgs(a, layer, q, num_heads, scale, out, dev.seqs, dev.tables, attn_extras_);
  a.window = static_cast<int32_t>(sliding_window);
  a.items = dev.items;
  a.num_items = dev.num_items;
  // The step's key splits, halved while the partial states of every (item, query head, split) would
  // not fit the buffer (sized for GQA groups of up to 32 heads: Falcon-7B's 71 take fewer splits).
  a.splits = dev.splits;
  while (a.splits > 1 && cuda::decodePartialBytes(dev.num_items, num_heads, kv_.geometry().head_dim,
                                                  a.splits) > partial_.bytes())
    a.splits /= 2;
  a.partial = static_cast<float*>(partial_.get());
  a.partial_bytes = partial_.bytes();
  a.tensor_cores = tuning().mma_decode;
  a.k_scale = kv_.scale(layer, 0);
  a.v_scale = kv_.scale(layer, 1);
  return a;
}

void CudaBackend::ropeAttention(int64_t layer, TensorView q, TensorView k, const TensorView& v, int64_t head_dim,
                                int64_t num_heads, int64_t sliding_window, float scale, TensorView out) {
  if (failed()) return;
  const DeviceStep& dev = step_.dev();
  const KvPoolGeometry& g = kv_.geometry();
  // (Sequences of at most one new row each: every row is an item of the decode kernel.)
  const bool fuse = tuning().rope_fusion && tuning().mma_decode && step_.singleTokenRows() && dev.num_items > 0 &&
                    head_dim == g.head_dim && k.dtype == DType::kF32 && v.dtype == DType::kF32 &&
                    cuda::decodeRopeSupported(kv_.layout(), static_cast<int32_t>(num_heads), kv_.primary(), g.dtype,
                                              step_.host().rotary_dim, f32(k), ld(k), f32(v), ld(v));
  if (!fuse) {
    ropeWriteKv(layer, q, k, v, head_dim);
    attention(layer, q, num_heads, sliding_window, scale, out);
    return;
  }
  const cuda::DecodeAttnArgs base = decodeArgs(layer, q, num_heads, sliding_window, scale, out);
  OpScope scope(this,
                [&] { return strprintf("ropeAttention items=%d splits=%d", dev.num_items, base.splits); });
  if (!checkAttention(q, num_heads, sliding_window, out)) return;
  cuda::DecodeAttnArgs a = base;
  a.rope.k = f32(k);
  a.rope.ld_k = ld(k);
  a.rope.v = f32(v);
  a.rope.ld_v = ld(v);
  a.rope.pool = kv_.primary();
  a.rope.positions = dev.positions;
  a.rope.row_table = dev.row_table;
  a.rope.slots = dev.slots;
  a.rope.inv_freq = step_.host().rotary_dim > 0 ? dev.inv_freq : nullptr;  // null: the KV write alone
  a.rope.half = static_cast<int32_t>(step_.host().rotary_dim / 2);
  a.rope.scaling = step_.host().rope_scaling;
  LLMRT_CUDA_OP_CHECK(cuda::decodeAttention(kv_.primary(), g.dtype, kv_.layout(), a, stream_.get()));
}

void CudaBackend::attention(int64_t layer, const TensorView& q, int64_t num_heads, int64_t sliding_window,
                            float scale, TensorView out) {
  if (failed()) return;
  const DeviceStep& dev = step_.dev();
  const DType kv_dtype = kv_.geometry().dtype;
  const cuda::DecodeAttnArgs decode = decodeArgs(layer, q, num_heads, sliding_window, scale, out);
  OpScope scope(this, [&] {
    return strprintf("attention items=%d tiles=%d splits=%d", dev.num_items, dev.num_tiles, decode.splits);
  });
  if (!checkAttention(q, num_heads, sliding_window, out)) return;
  if (dev.num_items > 0)
    LLMRT_CUDA_OP_CHECK(cuda::decodeAttention(kv_.primary(), kv_dtype, kv_.layout(), decode, stream_.get()));
  if (dev.num_tiles > 0) {
    if (!cuda::flashAttentionSupported(kv_.layout(), static_cast<int32_t>(num_heads))) {
      fail(unimplemented("attention: the context kernel does not support " + std::to_string(num_heads) + " heads"));
      return;
    }
    cuda::FlashAttnArgs a{};
    commonAttnArgs(a, layer, q, num_heads, scale, out, dev.seqs, dev.tables, attn_extras_);
    a.sliding_window = static_cast<int32_t>(sliding_window);
    a.tiles = dev.tiles;
    a.num_tiles = dev.num_tiles;
    a.k_scale = kv_.scale(layer, 0);
    a.v_scale = kv_.scale(layer, 1);
    LLMRT_CUDA_OP_CHECK(cuda::flashAttention(kv_.primary(), kv_dtype, kv_.layout(), a, stream_.get()));
  }
}

}  // namespace llmrt
