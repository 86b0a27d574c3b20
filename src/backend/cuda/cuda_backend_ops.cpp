// CudaBackend ops, host side: the step upload, argument checks, kernel launches
// (cuda_ops.cu, cuda_gemv.cu, cuda_attention.cu) and cuBLAS matrix products.
#include <cassert>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_flash_attention.h"
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

// Sections of the per-step upload, each 16-byte aligned.
class Packer {
 public:
  template <typename T>
  size_t add(size_t count) {
    const size_t at = (size_ + 15) & ~size_t{15};
    size_ = at + count * sizeof(T);
    return at;
  }
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
};

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001B3ull + (h >> 29); }

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

int32_t CudaBackend::chooseSplits(int64_t items, int64_t max_keys) const {
  // Enough CTAs for split_waves_ CTAs per SM, but at least one 32-key tile per split.
  const int64_t ctas = items * geometry_.num_kv_heads;
  const int64_t target = static_cast<int64_t>(split_waves_) * num_sms_;
  if (ctas == 0 || ctas * 2 > target) return 1;
  const int64_t want = std::min({(target + ctas - 1) / ctas, std::max<int64_t>(1, max_keys / 32), int64_t{1024}});
  int32_t splits = 1;  // a power of two, so a few recorded graphs cover every length
  while (static_cast<int64_t>(splits) * 2 <= want) splits *= 2;
  return splits;
}

Status CudaBackend::beginStep(const StepInputs& inputs) {
  if (failed()) return error_;
  LLMRT_RETURN_IF_ERROR(copyStepInputs(inputs, geometry_, step_));
  const int64_t T = step_.numTokens(), S = static_cast<int64_t>(step_.seqs.size());
  const int64_t R = static_cast<int64_t>(step_.logit_rows.size());

  // Attention work lists: context chunks of kFlashMinRows rows or more go to the tensor-core
  // kernel in tiles of kFlashBlockM rows (bf16 or fp16 cache, head_dim 64 or 128); every other row is an
  // item of the decode kernel.
  constexpr int64_t kFlashMinRows = 16;
  const bool flash = use_flash_ && isHalf(geometry_.dtype) &&
                     cuda::flashAttentionSupported(kvLayout(), static_cast<int32_t>(geometry_.num_kv_heads));
  items_.clear();
  tiles_.clear();
  int64_t item_keys = 0;
  for (int64_t s = 0; s < S; ++s) {
    const HostStep::Seq& q = step_.seqs[static_cast<size_t>(s)];
    if (flash && q.q_len >= kFlashMinRows) {
      for (int64_t r = 0; r < q.q_len; r += cuda::kFlashBlockM) tiles_.push_back(int2{static_cast<int>(s), static_cast<int>(r)});
      continue;
    }
    for (int64_t r = 0; r < q.q_len; ++r) items_.push_back(int2{static_cast<int>(q.q_start + r), static_cast<int>(s)});
    if (q.q_len > 0) item_keys = std::max(item_keys, q.kv_len);
  }
  const int32_t splits = chooseSplits(static_cast<int64_t>(items_.size()), item_keys);
  single_token_rows_ = true;
  for (const HostStep::Seq& q : step_.seqs) single_token_rows_ = single_token_rows_ && q.q_len <= 1;

  // Layout: sizes fix the offsets; the block tables (whose total length varies
  // from step to step) come last, so a layout hash covers every kernel argument.
  Packer pk;
  const size_t o_ids = pk.add<int32_t>(T), o_pos = pk.add<int32_t>(T), o_rt = pk.add<int32_t>(T);
  const size_t o_slots = pk.add<int64_t>(T), o_seqs = pk.add<cuda::AttnSeqDev>(S), o_logit = pk.add<int64_t>(R);
  const size_t o_items = pk.add<int2>(items_.size()), o_tiles = pk.add<int2>(tiles_.size());
  const size_t o_inv = pk.add<float>(step_.inv_freq.size()), o_tables = pk.add<int32_t>(step_.tables.size());
  const size_t o_fed = pk.add<FedToken>(step_.fed.size());  // read only by the feed kernel below
  const size_t bytes = pk.size();
  static_assert(sizeof(FedToken) == sizeof(int2));
  cuda::ResultTokens fed_src;  // the latest argmax or sampling result
  if (!step_.fed.empty()) {
    int32_t max_src = 0;
    for (const FedToken& f : step_.fed) max_src = std::max(max_src, f.src);
    LLMRT_ASSIGN_OR_RETURN(fed_src, latestResultTokens(max_src, "beginStep (fed tokens)"));
  }

  if (!reserve(meta_, std::max(bytes, size_t{1} << 20))) return error_;
  LLMRT_RETURN_IF_ERROR(reservePinned(pinned_meta_, bytes));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(meta_copied_));  // the previous upload has read it
  auto* base = static_cast<uint8_t*>(pinned_meta_.ptr);
  auto put = [&](size_t off, const void* src, size_t n) {
    if (n) std::memcpy(base + off, src, n);
  };
  put(o_ids, step_.token_ids.data(), T * sizeof(int32_t));
  put(o_pos, step_.positions.data(), T * sizeof(int32_t));
  put(o_rt, step_.row_rope_table.data(), T * sizeof(int32_t));
  put(o_slots, step_.slots.data(), T * sizeof(int64_t));
  auto* seqs = reinterpret_cast<cuda::AttnSeqDev*>(base + o_seqs);
  for (int64_t s = 0; s < S; ++s) {
    const HostStep::Seq& q = step_.seqs[static_cast<size_t>(s)];
    seqs[s] = cuda::AttnSeqDev{static_cast<int32_t>(q.q_start), static_cast<int32_t>(q.q_len),
                               static_cast<int32_t>(q.kv_len), static_cast<int32_t>(q.table_offset)};
  }
  put(o_logit, step_.logit_rows.data(), R * sizeof(int64_t));
  put(o_items, items_.data(), items_.size() * sizeof(int2));
  put(o_tiles, tiles_.data(), tiles_.size() * sizeof(int2));
  put(o_inv, step_.inv_freq.data(), step_.inv_freq.size() * sizeof(float));
  put(o_tables, step_.tables.data(), step_.tables.size() * sizeof(int32_t));
  put(o_fed, step_.fed.data(), step_.fed.size() * sizeof(FedToken));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(meta_.ptr, pinned_meta_.ptr, bytes, cudaMemcpyHostToDevice, stream_));
  if (!step_.fed.empty()) {
    auto* d8 = static_cast<uint8_t*>(meta_.ptr);
    LLMRT_CUDA_RETURN_IF_ERROR(cuda::feedTokens(reinterpret_cast<int32_t*>(d8 + o_ids),
                                                reinterpret_cast<const int2*>(d8 + o_fed),
                                                static_cast<int32_t>(step_.fed.size()), fed_src, stream_));
  }
  LLMRT_RETURN_IF_ERROR(openStepTiming());  // (after the upload: the host's packing is not device time)
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(meta_copied_, stream_));

  auto* d = static_cast<uint8_t*>(meta_.ptr);
  dev_.token_ids = reinterpret_cast<const int32_t*>(d + o_ids);
  dev_.positions = reinterpret_cast<const int32_t*>(d + o_pos);
  dev_.row_table = reinterpret_cast<const int32_t*>(d + o_rt);
  dev_.slots = reinterpret_cast<const int64_t*>(d + o_slots);
  dev_.seqs = reinterpret_cast<const cuda::AttnSeqDev*>(d + o_seqs);
  dev_.logit_rows = reinterpret_cast<const int64_t*>(d + o_logit);
  dev_.items = reinterpret_cast<const int2*>(d + o_items);
  dev_.num_items = static_cast<int32_t>(items_.size());
  dev_.tiles = reinterpret_cast<const int2*>(d + o_tiles);
  dev_.num_tiles = static_cast<int32_t>(tiles_.size());
  dev_.inv_freq = reinterpret_cast<const float*>(d + o_inv);
  dev_.tables = reinterpret_cast<const int32_t*>(d + o_tables);
  dev_.splits = splits;

  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t v : {static_cast<uint64_t>(T), static_cast<uint64_t>(S), static_cast<uint64_t>(R),
                     static_cast<uint64_t>(items_.size()), static_cast<uint64_t>(tiles_.size()),
                     static_cast<uint64_t>(step_.inv_freq.size()), static_cast<uint64_t>(splits),
                     static_cast<uint64_t>(step_.rotary_dim), static_cast<uint64_t>(single_token_rows_)})
    h = mix(h, v);
  step_layout_ = h;
  return Status::ok();
}

void CudaBackend::embedding(const TensorView& table, TensorView out) {
  if (failed() || step_.token_ids.empty()) return;
  OpScope scope(this, [&] { return std::string("embedding"); });
  if (!checkDtypes("embedding out", out, DType::kF32)) return;
  LLMRT_CUDA_OP_CHECK(cuda::embedding(table.data, table.dtype, cols(table), dev_.token_ids, step_.numTokens(),
                                      f32(out), ld(out), stream_));
}

void CudaBackend::rmsNorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) {
  if (failed()) return;
  OpScope scope(this, [&] { return std::string("rmsNorm"); });
  if (!checkDtypes("rmsNorm", x, DType::kF32) || !checkDtypes("rmsNorm weight", weight, DType::kF32) ||
      !checkActivation("rmsNorm out", out))
    return;
  LLMRT_CUDA_OP_CHECK(
      cuda::rmsNorm(f32(x), ld(x), f32(weight), eps, rows(x), cols(x), out.data, out.dtype, ld(out), stream_));
}

void CudaBackend::gatherLogitRows(const TensorView& src, TensorView out) {
  if (failed() || step_.logit_rows.empty()) return;
  OpScope scope(this, [&] { return std::string("gatherLogitRows"); });
  if (!checkDtypes("gatherLogitRows src", src, DType::kF32) || !checkDtypes("gatherLogitRows out", out, DType::kF32))
    return;
  LLMRT_CUDA_OP_CHECK(cuda::gatherRows(f32(src), ld(src), dev_.logit_rows,
                                       static_cast<int64_t>(step_.logit_rows.size()), cols(src), f32(out), ld(out),
                                       stream_));
}

void CudaBackend::siluMul(const TensorView& gate_up, TensorView out) {
  if (failed()) return;
  OpScope scope(this, [&] { return std::string("siluMul"); });
  if (!checkActivation("siluMul in", gate_up) || !checkActivation("siluMul out", out)) return;
  LLMRT_CUDA_OP_CHECK(cuda::siluMul(gate_up.data, gate_up.dtype, ld(gate_up), rows(out), cols(out), out.data,
                                    out.dtype, ld(out), stream_));
}

// Steps of up to norm_split_rows_ rows that the matrix-vector kernel serves (gemv_rows_: so the
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
  const bool split = m <= norm_split_rows_ && m <= gemv_rows_ && use_gemv_ && isHalf(w1.dtype) &&
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
                               static_cast<float*>(norm_sums_.ptr)};
    LLMRT_CUDA_OP_CHECK(cuda::gemv(x.data, x.dtype, ld(x), w1.data, w1.dtype, m, cols(x), h, b1 ? f32(*b1) : nullptr,
                                   residual.data, DType::kF32, ld(residual), true, stream_, nullptr, &no));
  }
  OpScope scope(this, [&] {
    return strprintf("norm+linear gemv m<=%lld n=%lld k=%lld", rowBucket(m), static_cast<long long>(n),
                     static_cast<long long>(h));
  });
  const cuda::GemvNormIn ni{static_cast<const float*>(norm_sums_.ptr), parts, eps};
  LLMRT_CUDA_OP_CHECK(cuda::gemv(normed.data, normed.dtype, ld(normed), w2.data, w2.dtype, m, h, n,
                                 b2 ? f32(*b2) : nullptr, out.data, out.dtype, ld(out), false, stream_, &ni));
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
  if (!checkActivation("linear x", x) || !checkActivation("linear out", out)) return;
  const bool half_w = isHalf(w.dtype);
  const bool gemv = half_w && use_gemv_ && m <= gemv_rows_ && cuda::gemvSupported(x.data, x.dtype, ld(x), m, k);
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
    LLMRT_CUBLAS_OP_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n),
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
                                     out.dtype, ld(out), accumulate, stream_));
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
        x_lo = static_cast<uint8_t*>(half_x_.ptr) + static_cast<size_t>(m * k) * 2;
        LLMRT_CUDA_OP_CHECK(cuda::splitToHalf(f32(x), ld(x), m, k, half_x_.ptr, x_lo, w.dtype, stream_));
      } else {
        LLMRT_CUDA_OP_CHECK(cuda::toHalf(f32(x), ld(x), m, k, half_x_.ptr, w.dtype, stream_));
      }
      xb = half_x_.ptr;
      ldxb = k;
    }
    const cudaDataType_t in_type = w.dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
    const cudaDataType_t out_type = out.dtype == DType::kF32 ? CUDA_R_32F : in_type;
    // A plan per shape (cuBLASLt); cublasGemmEx where cuBLASLt has no algorithm for it.
    for (const void* part : {xb, static_cast<const void*>(x_lo)}) {
      if (part == nullptr) break;
      const bool add = accumulate || part != xb;  // (the lo part adds to the hi part's product)
      const cublasStatus_t lt = lt_.run(in_type, w.data, part, ldxb, out.data, out_type, m, n, k, ld(out),
                                        cublas_ws_.ptr, cublas_ws_.bytes, stream_, add);
      if (lt != CUBLAS_STATUS_SUCCESS) {
        LLMRT_CUBLAS_OP_CHECK(cublasGemmEx(
            cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &one,
            w.data, in_type, static_cast<int>(k), part, in_type, static_cast<int>(ldxb), add ? &one : &zero,
            out.data, out_type, static_cast<int>(ld(out)), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      }
    }
  } else {
    fail(invalidArgument("linear: weight dtype " + std::string(dtypeName(w.dtype)) + " is not F32, BF16 or F16"));
    return;
  }
  if (bias_ptr != nullptr)
    LLMRT_CUDA_OP_CHECK(cuda::addBias(out.data, out.dtype, ld(out), bias_ptr, m, n, stream_));
}

void CudaBackend::ropeWriteKv(int64_t layer, TensorView q, TensorView k, const TensorView& v, int64_t head_dim) {
  if (failed() || step_.token_ids.empty()) return;
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
  a.positions = dev_.positions;
  a.row_table = dev_.row_table;
  a.slots = dev_.slots;
  a.inv_freq = dev_.inv_freq;
  a.half = step_.rotary_dim / 2;
  a.scaling = step_.rope_scaling;
  a.rows = step_.numTokens();
  LLMRT_CUDA_OP_CHECK(cuda::ropeWriteKv(primary_, geometry_.dtype, kvLayout(), a, stream_));
}

bool CudaBackend::checkAttention(const TensorView& q, int64_t num_heads, const TensorView& out) {
  if (num_heads % geometry_.num_kv_heads != 0 || num_heads / geometry_.num_kv_heads > 32) {
    fail(unimplemented("attention: " + std::to_string(num_heads) + " heads over " +
                       std::to_string(geometry_.num_kv_heads) +
                       " KV heads (a GQA group of at most 32 is supported)"));
    return false;
  }
  return checkDtypes("attention q", q, DType::kF32) && checkActivation("attention out", out);
}

// What both attention kernels' arguments take: the packed q / out, heads, scale, layer and the
// step's sequences.
template <typename Args>
void commonAttnArgs(Args& a, int64_t layer, const TensorView& q, int64_t num_heads, float scale, const TensorView& out,
                    const cuda::AttnSeqDev* seqs, const int32_t* tables) {
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
}

cuda::DecodeAttnArgs CudaBackend::decodeArgs(int64_t layer, const TensorView& q, int64_t num_heads,
                                             int64_t sliding_window, float scale, const TensorView& out) const {
  cuda::DecodeAttnArgs a{};
  commonAttnArgs(a, layer, q, num_heads, scale, out, dev_.seqs, dev_.tables);
  a.window = static_cast<int32_t>(sliding_window);
  a.items = dev_.items;
  a.num_items = dev_.num_items;
  a.splits = dev_.splits;
  a.partial = static_cast<float*>(partial_.ptr);
  a.tensor_cores = use_mma_decode_;
  return a;
}

void CudaBackend::ropeAttention(int64_t layer, TensorView q, TensorView k, const TensorView& v, int64_t head_dim,
                                int64_t num_heads, int64_t sliding_window, float scale, TensorView out) {
  if (failed()) return;
  // (Sequences of at most one new row each: every row is an item of the decode kernel.)
  const bool fuse = use_rope_fusion_ && use_mma_decode_ && single_token_rows_ && dev_.num_items > 0 &&
                    head_dim == geometry_.head_dim && k.dtype == DType::kF32 && v.dtype == DType::kF32 &&
                    cuda::decodeRopeSupported(kvLayout(), static_cast<int32_t>(num_heads), primary_, geometry_.dtype,
                                              step_.rotary_dim, f32(k), ld(k), f32(v), ld(v));
  if (!fuse) {
    ropeWriteKv(layer, q, k, v, head_dim);
    attention(layer, q, num_heads, sliding_window, scale, out);
    return;
  }
  OpScope scope(this, [&] { return strprintf("ropeAttention items=%d splits=%d", dev_.num_items, dev_.splits); });
  if (!checkAttention(q, num_heads, out)) return;
  cuda::DecodeAttnArgs a = decodeArgs(layer, q, num_heads, sliding_window, scale, out);
  a.rope.k = f32(k);
  a.rope.ld_k = ld(k);
  a.rope.v = f32(v);
  a.rope.ld_v = ld(v);
  a.rope.pool = primary_;
  a.rope.positions = dev_.positions;
  a.rope.row_table = dev_.row_table;
  a.rope.slots = dev_.slots;
  a.rope.inv_freq = dev_.inv_freq;
  a.rope.scaling = step_.rope_scaling;
  LLMRT_CUDA_OP_CHECK(cuda::decodeAttention(primary_, geometry_.dtype, kvLayout(), a, stream_));
}

void CudaBackend::attention(int64_t layer, const TensorView& q, int64_t num_heads, int64_t sliding_window,
                            float scale, TensorView out) {
  if (failed()) return;
  OpScope scope(this, [&] { return strprintf("attention items=%d tiles=%d splits=%d", dev_.num_items, dev_.num_tiles, dev_.splits); });
  if (!checkAttention(q, num_heads, out)) return;
  if (dev_.num_items > 0)
    LLMRT_CUDA_OP_CHECK(cuda::decodeAttention(primary_, geometry_.dtype, kvLayout(),
                                              decodeArgs(layer, q, num_heads, sliding_window, scale, out), stream_));
  if (dev_.num_tiles > 0) {
    if (!cuda::flashAttentionSupported(kvLayout(), static_cast<int32_t>(num_heads))) {
      fail(unimplemented("attention: the context kernel does not support " + std::to_string(num_heads) + " heads"));
      return;
    }
    cuda::FlashAttnArgs a{};
    commonAttnArgs(a, layer, q, num_heads, scale, out, dev_.seqs, dev_.tables);
    a.sliding_window = static_cast<int32_t>(sliding_window);
    a.tiles = dev_.tiles;
    a.num_tiles = dev_.num_tiles;
    LLMRT_CUDA_OP_CHECK(cuda::flashAttention(primary_, geometry_.dtype, kvLayout(), a, stream_));
  }
}

}  // namespace llmrt
