// CudaBackend ops, host side: argument checks, metadata uploads, kernel
// launches (cuda_ops.cu, cuda_attention.cu) and cuBLAS matrix products.
#include <cassert>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"

namespace llmrt {
namespace {

int64_t rows(const TensorView& t) { return t.shape.rank() >= 2 ? t.shape[0] : 1; }
int64_t cols(const TensorView& t) { return t.shape[t.shape.rank() - 1]; }
int64_t ld(const TensorView& t) { return t.shape.rank() >= 2 ? t.strides[0] : cols(t); }
float* f32(const TensorView& t) { return static_cast<float*>(t.data); }

}  // namespace

void CudaBackend::embedding(const TensorView& table, std::span<const int32_t> ids, TensorView out) {
  if (failed() || ids.empty()) return;
  auto* d_ids = static_cast<const int32_t*>(upload(0, ids.data(), ids.size_bytes()));
  if (!d_ids) return;
  LLMRT_CUDA_OP_CHECK(cuda::embedding(table.data, table.dtype, cols(table), d_ids,
                                      static_cast<int64_t>(ids.size()), f32(out), ld(out), stream_));
}

void CudaBackend::rmsNorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) {
  if (failed()) return;
  assert(weight.dtype == DType::kF32);
  LLMRT_CUDA_OP_CHECK(cuda::rmsNorm(f32(x), ld(x), nullptr, 0, f32(weight), eps, rows(x), cols(x), f32(out),
                                    ld(out), stream_));
}

void CudaBackend::addRmsNorm(TensorView residual, const TensorView& x, const TensorView& weight, float eps,
                             TensorView out) {
  if (failed()) return;
  LLMRT_CUDA_OP_CHECK(cuda::rmsNorm(f32(x), ld(x), f32(residual), ld(residual), f32(weight), eps, rows(x),
                                    cols(x), f32(out), ld(out), stream_));
}

void CudaBackend::add(TensorView x, const TensorView& y) {
  if (failed()) return;
  LLMRT_CUDA_OP_CHECK(cuda::add(f32(x), ld(x), f32(y), ld(y), rows(x), cols(x), stream_));
}

void CudaBackend::gatherRows(const TensorView& src, std::span<const int64_t> rows_idx, TensorView out) {
  if (failed() || rows_idx.empty()) return;
  auto* d_rows = static_cast<const int64_t*>(upload(0, rows_idx.data(), rows_idx.size_bytes()));
  if (!d_rows) return;
  LLMRT_CUDA_OP_CHECK(cuda::gatherRows(f32(src), ld(src), d_rows, static_cast<int64_t>(rows_idx.size()),
                                       cols(src), f32(out), ld(out), stream_));
}

void CudaBackend::siluMul(const TensorView& gate_up, TensorView out) {
  if (failed()) return;
  LLMRT_CUDA_OP_CHECK(
      cuda::siluMul(f32(gate_up), ld(gate_up), rows(out), cols(out), f32(out), ld(out), stream_));
}

void CudaBackend::linear(const TensorView& x, const TensorView& w, const TensorView* bias, TensorView out) {
  if (failed()) return;
  const int64_t m = rows(x), k = cols(x), n = w.shape[0];
  assert(w.shape[1] == k && cols(out) == n);
  if (m == 0) return;
  const float one = 1.0f, zero = 0.0f;
  // Row-major out[m, n] = x[m, k] W[n, k]^T is column-major out^T[n, m] = W^T x^T:
  // W (row-major [n, k]) is a column-major [k, n] matrix used transposed.
  if (w.dtype == DType::kF32) {
    LLMRT_CUBLAS_OP_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n),
                                      static_cast<int>(m), static_cast<int>(k), &one, f32(w),
                                      static_cast<int>(k), f32(x), static_cast<int>(ld(x)), &zero, f32(out),
                                      static_cast<int>(ld(out))));
  } else if (w.dtype == DType::kBF16) {
    // bf16 x bf16 with fp32 accumulation and fp32 output; the fp32 activations are rounded first.
    if (!reserve(bf16_x_, static_cast<size_t>(m * k) * 2)) return;
    LLMRT_CUDA_OP_CHECK(cuda::toBf16(f32(x), ld(x), m, k, bf16_x_.ptr, stream_));
    LLMRT_CUBLAS_OP_CHECK(cublasGemmEx(
        cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
        &one, w.data, CUDA_R_16BF, static_cast<int>(k), bf16_x_.ptr, CUDA_R_16BF, static_cast<int>(k), &zero,
        out.data, CUDA_R_32F, static_cast<int>(ld(out)), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    fail(invalidArgument("linear: weight dtype " + std::string(dtypeName(w.dtype)) + " is not F32 or BF16"));
    return;
  }
  if (bias != nullptr) LLMRT_CUDA_OP_CHECK(cuda::addBias(f32(out), ld(out), f32(*bias), m, n, stream_));
}

void CudaBackend::rope(TensorView q, TensorView k, int64_t head_dim, std::span<const int32_t> positions,
                       int64_t row_begin, int64_t row_end, const RopeParams& p) {
  if (failed() || row_end <= row_begin) return;
  const int64_t n = row_end - row_begin, half = p.rotary_dim / 2;
  // One upload: positions of the rows, then the inverse frequencies (both 4-byte values).
  std::vector<uint32_t> meta(static_cast<size_t>(n + half));
  std::memcpy(meta.data(), positions.data() + row_begin, static_cast<size_t>(n) * 4);
  std::memcpy(meta.data() + n, p.inv_freq, static_cast<size_t>(half) * 4);
  auto* d = static_cast<uint32_t*>(upload(0, meta.data(), meta.size() * 4));
  if (!d) return;
  LLMRT_CUDA_OP_CHECK(
      cuda::rope(f32(q) + row_begin * ld(q), ld(q), cols(q) / head_dim, f32(k) + row_begin * ld(k), ld(k),
                 cols(k) / head_dim, head_dim, reinterpret_cast<const int32_t*>(d), n,
                 reinterpret_cast<const float*>(d + n), p.rotary_dim, p.attention_scaling, stream_));
}

void CudaBackend::writeKv(int64_t layer, const TensorView& k, const TensorView& v,
                          std::span<const int64_t> slots) {
  if (failed() || slots.empty()) return;
  auto* d_slots = static_cast<const int64_t*>(upload(0, slots.data(), slots.size_bytes()));
  if (!d_slots) return;
  LLMRT_CUDA_OP_CHECK(cuda::writeKv(primary_, geometry_.dtype, kvLayout(), layer, f32(k), ld(k), f32(v),
                                    ld(v), d_slots, static_cast<int64_t>(slots.size()), stream_));
}

void CudaBackend::attention(int64_t layer, const TensorView& q, int64_t num_heads,
                            std::span<const AttentionSeq> seqs, float scale, TensorView out) {
  if (failed()) return;
  if (num_heads % geometry_.num_kv_heads != 0 || num_heads / geometry_.num_kv_heads > 32) {
    fail(unimplemented("attention: " + std::to_string(num_heads) + " heads over " +
                       std::to_string(geometry_.num_kv_heads) +
                       " KV heads (a GQA group of at most 32 is supported)"));
    return;
  }
  const int64_t tpb = geometry_.tokens_per_block;
  std::vector<int32_t> items, seq_meta, tables;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const AttentionSeq& a = seqs[s];
    seq_meta.insert(seq_meta.end(), {static_cast<int32_t>(a.q_start), static_cast<int32_t>(a.q_len),
                                     static_cast<int32_t>(a.kv_len), static_cast<int32_t>(a.sliding_window),
                                     static_cast<int32_t>(tables.size())});
    tables.insert(tables.end(), a.block_table, a.block_table + (a.kv_len + tpb - 1) / tpb);
    for (int64_t t = 0; t < a.q_len; ++t) {
      items.push_back(static_cast<int32_t>(a.q_start + t));
      items.push_back(static_cast<int32_t>(s));
    }
  }
  if (items.empty()) return;
  std::vector<int32_t> packed;
  packed.reserve(items.size() + seq_meta.size() + tables.size());
  packed.insert(packed.end(), items.begin(), items.end());
  packed.insert(packed.end(), seq_meta.begin(), seq_meta.end());
  packed.insert(packed.end(), tables.begin(), tables.end());
  auto* d = static_cast<const int32_t*>(upload(0, packed.data(), packed.size() * sizeof(int32_t)));
  if (!d) return;
  cuda::AttentionArgs a{};
  a.q = f32(q);
  a.ld_q = ld(q);
  a.out = f32(out);
  a.ld_out = ld(out);
  a.num_heads = num_heads;
  a.scale = scale;
  a.layer = layer;
  a.items = d;
  a.num_items = static_cast<int64_t>(items.size() / 2);
  a.seqs = d + items.size();
  a.tables = d + items.size() + seq_meta.size();
  LLMRT_CUDA_OP_CHECK(cuda::attention(primary_, geometry_.dtype, kvLayout(), a, stream_));
}

}  // namespace llmrt
