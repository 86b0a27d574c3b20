// Launchers of the CUDA backend's kernels (cuda_ops.cu, cuda_arch_ops.cu, cuda_attention.cu).
// Each enqueues on `stream` and returns the launch's error (cudaGetLastError);
// pointers are device pointers, leading dimensions are in elements.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "backend/row_sampling.h"
#include "core/dtype.h"

namespace llmrt::cuda {

// out[i, :] = table[ids[i], :]; table is F32, BF16 or F16 [*, dim].
cudaError_t embedding(const void* table, DType table_dtype, int64_t dim, const int32_t* ids, int64_t n,
                      float* out, int64_t ld_out, cudaStream_t stream);
// rmsNorm and ropeWriteKv take their float4 kernels where sizes and alignment allow (on by
// default; off for same-call comparisons: --cuda-tuning vector_ops=off).
void setVectorOpsEnabled(bool on);
// out = round(round(w * x) * inv_rms) per row, inv_rms = 1 / sqrt(mean(x^2) + eps) with the
// squares added in the order the split matrix-vector products use (gemv's GemvNormIn below),
// round() to out's type: F32 (no rounding), BF16 or F16 (`out_dtype`); the rest float32.
cudaError_t rmsNorm(const float* x, int64_t ld_x, const float* w, float eps, int64_t rows, int64_t cols, void* out,
                    DType out_dtype, int64_t ld_out, cudaStream_t stream);
// out[r, :] += bias (out F32, BF16 or F16)
cudaError_t addBias(void* out, DType out_dtype, int64_t ld_out, const float* bias, int64_t rows, int64_t cols,
                    cudaStream_t stream);
// out[i, :] = src[rows[i], :]
cudaError_t gatherRows(const float* src, int64_t ld_src, const int64_t* rows, int64_t n, int64_t cols,
                       float* out, int64_t ld_out, cudaStream_t stream);
// out[r, i] = silu(gu[r, i]) * gu[r, inter + i] (gu and out each F32, BF16 or F16)
cudaError_t siluMul(const void* gu, DType gu_dtype, int64_t ld_gu, int64_t rows, int64_t inter, void* out,
                    DType out_dtype, int64_t ld_out, cudaStream_t stream);
// rmsNorm and siluMul whose output rows are an 8-bit product's input: each value rounded to
// `round` (the activation dtype) as rmsNorm / siluMul store it, then the row's codes (`codes`
// F8_E4M3 or I8) by w8a8QuantizeRows's rule into q (row stride ld_q) and its scale into scales:
// the bits of the op into `round` followed by w8a8QuantizeRows, one pass. cudaErrorNotSupported
// where the fused kernel does not fit (rmsNorm: cols % 4, 16-byte aligned x and w; siluMul:
// inter % 8, 16-byte aligned gu; both up to kQuantizedInputMaxFeatures): then run the two.
inline constexpr int64_t kQuantizedInputMaxFeatures = 16384;  // (both fused kernels)
cudaError_t rmsNormQuantize(const float* x, int64_t ld_x, const float* w, float eps, int64_t rows,
                            int64_t cols, DType round, DType codes, uint8_t* q, int64_t ld_q, float* scales,
                            cudaStream_t stream);
cudaError_t siluMulQuantize(const void* gu, DType gu_dtype, int64_t ld_gu, int64_t rows, int64_t inter,
                            DType round, DType codes, uint8_t* q, int64_t ld_q, float* scales,
                            cudaStream_t stream);
// The ops only some architectures use (cuda_arch_ops.cu). Views are [rows, cols] with a row
// stride (ld) each; "any" dtype is F32, BF16 or F16; arithmetic is float32.
// The MLP activations (backend.h's Activation, in its order).
enum class Act : uint8_t { kSilu, kGelu, kGeluTanh, kRelu };
// out = (x - mean) * rsqrt(var + eps) * w (+ b) per row: mean, then the biased variance of the
// deviations, in float32 (torch's layer_norm); x F32, w and b (null: none) F32 [cols], out any.
cudaError_t layerNorm(const float* x, int64_t ld_x, const float* w, const float* b, float eps, int64_t rows,
                      int64_t cols, void* out, DType out_dtype, int64_t ld_out, cudaStream_t stream);
// out = act(x) element-wise (x and out any).
cudaError_t activation(Act act, const void* x, DType x_dtype, int64_t ld_x, int64_t rows, int64_t cols, void* out,
                       DType out_dtype, int64_t ld_out, cudaStream_t stream);
// out[r, i] = act(gu[r, i]) * gu[r, inter + i] (gu and out any); Act::kSilu is siluMul's kernel.
cudaError_t gatedActivation(Act act, const void* gu, DType gu_dtype, int64_t ld_gu, int64_t rows, int64_t inter,
                            void* out, DType out_dtype, int64_t ld_out, cudaStream_t stream);
// x[i, :] += table[positions[i], :] for i < n (table any [*, dim]; x F32).
cudaError_t addPositionEmbedding(const void* table, DType table_dtype, int64_t dim, const int32_t* positions,
                                 int64_t n, float* x, int64_t ld_x, cudaStream_t stream);
// residual += y (y any; residual F32).
cudaError_t addRows(const void* y, DType y_dtype, int64_t ld_y, int64_t rows, int64_t cols, float* residual,
                    int64_t ld_res, cudaStream_t stream);
// residual[r, :] += sigmoid(gate[r * ld_gate]) * y[r, :] (y any; gate and residual F32).
cudaError_t sigmoidGatedAdd(const void* y, DType y_dtype, int64_t ld_y, const float* gate, int64_t ld_gate,
                            int64_t rows, int64_t cols, float* residual, int64_t ld_res, cudaStream_t stream);
// x = x * scale, then with cap > 0 x = cap * tanh(x / cap); in place (F32).
cudaError_t scaleSoftcap(float* x, int64_t ld_x, int64_t rows, int64_t cols, float scale, float cap,
                         cudaStream_t stream);

// Converts a F32 [rows, cols] view (row stride ld) to contiguous `dtype` (BF16 or F16) [rows, cols].
cudaError_t toHalf(const float* x, int64_t ld_x, int64_t rows, int64_t cols, void* out, DType dtype,
                   cudaStream_t stream);
// The same as two contiguous parts: hi = H(x), lo = H(x - hi) (x ~ hi + lo to ~16 bits for bf16).
cudaError_t splitToHalf(const float* x, int64_t ld_x, int64_t rows, int64_t cols, void* hi, void* lo, DType dtype,
                        cudaStream_t stream);

// dst[i] = src[i] converted, i < n (src and dst each F32, BF16 or F16; rounding to nearest even).
// A finite value that the conversion turns into infinity (beyond F16's 65504) sets
// *first_bad = min(*first_bad, tag): the weight upload names the first such weight.
cudaError_t convertElements(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n, int32_t tag,
                            int32_t* first_bad, cudaStream_t stream);

// KV pool geometry as the kernels see it.
struct KvLayout {
  int64_t elems_per_block;  // [layers][2][kv_heads][tpb][head_dim]
  int64_t num_kv_heads;
  int64_t tokens_per_block;
  int64_t head_dim;
};
// log2 of tokens_per_block (a power of two), the shift the paged kernels index blocks with.
inline int tokensPerBlockShift(const KvLayout& g) {
  int shift = 0;
  while ((int64_t{1} << shift) < g.tokens_per_block) ++shift;
  return shift;
}
// What every attention kernel adds to its scaled scores (Backend::setAttentionExtras): with
// softcap > 0 the score becomes softcap * tanh(score / softcap), then with ALiBi slopes (device
// memory, one per query head) slope[h] * (key - query position) is added, before the mask and
// softmax. The kernels take a second instantiation for it (any()): the default's code is unchanged.
struct AttnExtras {
  float softcap = 0.0f;
  const float* alibi = nullptr;
  bool any() const { return softcap > 0.0f || alibi != nullptr; }
};
// One sequence of a step as the kernels see it (uploaded once per step).
struct AttnSeqDev {
  int32_t q_start;       // first packed row of this sequence
  int32_t q_len;         // new tokens this step
  int32_t kv_len;        // tokens in the cache after this step; the new ones are the last q_len
  int32_t table_offset;  // of this sequence's block table in the step's `tables`
};

// Rotates every row r of q/k in place (HF rotate-half, the first 2*half features of each head) at
// positions[r] with the RoPE table row_table[r] of inv_freq ([tables][half]), then writes the rotated
// k and v of the row into the pool (F32, BF16 or F16) of `layer` at slots[r] (skipped when < 0).
struct RopeKvArgs {
  float* q;
  int64_t ld_q;
  int64_t q_heads;
  float* k;
  int64_t ld_k;
  const float* v;
  int64_t ld_v;
  int64_t layer;
  const int32_t* positions;
  const int32_t* row_table;
  const int64_t* slots;
  const float* inv_freq;
  int64_t half;
  float scaling;
  int64_t rows;
  // What k and v are multiplied by before they are stored (an FP8 cache: its layer's inverse
  // scales; 1 for the others, which leaves them exact).
  float k_inverse = 1.0f;
  float v_inverse = 1.0f;
};
cudaError_t ropeWriteKv(void* pool, DType kv_dtype, const KvLayout& g, const RopeKvArgs& a, cudaStream_t stream);

// Paged attention of single query rows ("items"), the decode path (and every row where the
// tensor-core context kernel does not apply). One CTA per (item, kv head, split): the GQA group's
// query heads share each K/V tile. With splits > 1 the keys of a row are cut into `splits`
// ranges whose partial softmax states (acc[head_dim], max, sum) go to `partial`
// ([items][num_heads][splits][head_dim + 2]) and a second kernel merges them (flash-decoding).
struct DecodeAttnArgs {
  const float* q;
  int64_t ld_q;
  void* out;  // F32, BF16 or F16 (out_dtype)
  DType out_dtype;
  int64_t ld_out;
  int32_t num_heads;
  float scale;
  int32_t layer;
  int32_t window;  // 0 = full causal; else a query at p sees (p - window, p]
  const AttnSeqDev* seqs;
  const int32_t* tables;
  const int2* items;  // (packed row, sequence index)
  int32_t num_items;
  int32_t splits;  // 1..1024
  float* partial;  // splits > 1: num_items x num_heads x splits x (head_dim + 2) floats
  size_t partial_bytes = 0;  // partial's size: a step whose split states do not fit is refused
  AttnExtras extras;  // soft-capping and ALiBi (none by default)
  // An FP8 cache: its layer's K and V scales (K's with the score scale, V's on the output); else 1.
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  // A bf16 / fp16 cache where decodeMmaSupported() holds runs the tensor-core kernel (cuda_decode_mma.cu)
  // unless this is false (cuda tuning mma_decode=off, for measurements).
  bool tensor_cores = true;
  // RoPE and the KV write inside the tensor-core kernel (ropeAttention; rope.k non-null): for steps
  // whose every item is its sequence's one new row and a rotary dim that is a multiple of 16 (the
  // whole head or its first features, as GPT-J's 64 of 256 and Pythia's 32 of 128). Each CTA
  // rotates q as it reads it (q in memory stays as it was) and the CTA whose keys end at the row's
  // own key rotates that k, writes k and v into the pool at slots[row] (when >= 0) and puts them
  // into its shared tile itself: the same bits as ropeWriteKv followed by decodeAttention.
  struct Rope {
    const float* k = nullptr;
    int64_t ld_k = 0;
    const float* v = nullptr;
    int64_t ld_v = 0;
    void* pool = nullptr;  // the pool again, written
    const int32_t* positions = nullptr;
    const int32_t* row_table = nullptr;
    const int64_t* slots = nullptr;
    const float* inv_freq = nullptr;  // [tables][half]
    int32_t half = 0;                 // rotary dim / 2: features [0, 2 half) rotate
    float scaling = 1.0f;
  } rope;
};
cudaError_t decodeAttention(const void* pool, DType kv_dtype, const KvLayout& g, const DecodeAttnArgs& a,
                            cudaStream_t stream);
// Bytes of DecodeAttnArgs::partial that `splits` key splits of a step need.
inline size_t decodePartialBytes(int64_t num_items, int64_t num_heads, int64_t head_dim, int64_t splits) {
  return static_cast<size_t>(num_items) * static_cast<size_t>(num_heads) * static_cast<size_t>(splits) *
         static_cast<size_t>(head_dim + 2) * sizeof(float);
}
// Whether decodeAttention can take a step's RoPE and KV write (DecodeAttnArgs::rope): the tensor-core
// kernel runs, the rotary dim is a multiple of 16 up to head_dim or 0 (no rotary embedding: the KV write
// alone, with rope.inv_freq null) and k / v rows are 16-byte aligned float32.
bool decodeRopeSupported(const KvLayout& g, int32_t num_heads, const void* pool, DType kv_dtype, int64_t rotary_dim,
                         const float* k, int64_t ld_k, const float* v, int64_t ld_v);
// The tensor-core decode kernel (cuda_decode_mma.cu): bf16, fp16 or FP8 cache, head_dim 64, 128 or 256, any
// GQA group (8 query heads per CTA), tokens_per_block a power of two, 16-byte aligned pool and blocks.
// decodeAttentionMma launches only the attention kernel (decodeAttention adds the split merge).
bool decodeMmaSupported(const KvLayout& g, int32_t num_heads, const void* pool);
cudaError_t decodeAttentionMma(const void* pool, DType kv_dtype, const KvLayout& g, const DecodeAttnArgs& a,
                               cudaStream_t stream);
cudaError_t initDecodeMmaKernels();

#ifdef __CUDACC__
// What both decode kernels compute first: the keys [begin, end) that split `split` of item
// `item_index` sees (causal, sliding window; the range depends only on the row's own length, so a
// recorded launch stays valid as sequences grow; empty for trailing splits) and its block table.
struct DecodeKeys {
  int2 item;  // (packed row, sequence index)
  const int32_t* table;
  int64_t begin, end;
  int64_t pos;  // the row's own key
};
__device__ __forceinline__ DecodeKeys decodeKeys(const DecodeAttnArgs& a, int item_index, int split) {
  DecodeKeys k;
  k.item = a.items[item_index];
  const AttnSeqDev seq = a.seqs[k.item.y];
  k.table = a.tables + seq.table_offset;
  const int64_t pos = static_cast<int64_t>(seq.kv_len) - seq.q_len + (k.item.x - seq.q_start);
  const int64_t lo = a.window > 0 ? max(int64_t{0}, pos - a.window + 1) : 0;
  const int64_t chunk = (pos - lo + 1 + a.splits - 1) / a.splits;  // pos - lo + 1 >= 1 keys visible
  k.begin = lo + split * chunk;
  k.end = min(pos + 1, k.begin + chunk);
  k.pos = pos;
  return k;
}
// RoPE, written once for every kernel that rotates (so they agree to the bit): the cos and sin of
// a row's angle pos * inv_freq (float32, as HF's inv_freq @ position_ids) times the attention
// scaling, and the rotate-half pair (x1, x2) -> (x1 c - x2 s, x2 c + x1 s), each product rounded
// (no contraction into fma).
__device__ __forceinline__ float2 ropeCosSin(float pos, float inv_freq, float scaling) {
  float s, c;
  sincosf(pos * inv_freq, &s, &c);
  return make_float2(c * scaling, s * scaling);
}
__device__ __forceinline__ float2 ropeRotate(float x1, float x2, float c, float s) {
  return make_float2(__fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)), __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
}
// A scaled score with the attention extras applied (AttnExtras): soft-capped, then the ALiBi bias
// slope * (key - pos) (slope 0 without ALiBi), as the CPU reference computes it.
__device__ __forceinline__ float extraScore(const AttnExtras& e, float s, float slope, int64_t key, int64_t pos) {
  if (e.softcap > 0.0f) s = e.softcap * tanhf(s / e.softcap);
  return s + slope * static_cast<float>(key - pos);
}
__device__ __forceinline__ float alibiSlope(const AttnExtras& e, int head) {
  return e.alibi != nullptr ? e.alibi[head] : 0.0f;
}
// out[i] = v in the output's dtype (F32, BF16 or F16).
__device__ __forceinline__ void storeDecodeOut(const DecodeAttnArgs& a, int64_t i, float v) {
  if (a.out_dtype == DType::kBF16)
    static_cast<__nv_bfloat16*>(a.out)[i] = __float2bfloat16_rn(v);
  else if (a.out_dtype == DType::kF16)
    static_cast<__half*>(a.out)[i] = __float2half_rn(v);
  else
    static_cast<float*>(a.out)[i] = v;
}
#endif
// Shared-memory opt-ins of the attention kernels; once, before any launch (and before graph capture).
cudaError_t initAttentionKernels();

// out[r] = argmax of row r of logits [rows, vocab] (ties: the lowest id); -1 when the row holds a NaN
// or +inf or only -inf. Few rows of a large vocabulary are split over several CTAs per row, whose
// partial results go to `work` (argmaxWorkBytes(rows, vocab) bytes; none needed when that is 0).
size_t argmaxWorkBytes(int64_t rows, int64_t vocab);
cudaError_t argmaxRows(const float* logits, int64_t ld, int64_t rows, int64_t vocab, int32_t* out, void* work,
                       cudaStream_t stream);

// A step result's token ids on the device: row r's id is ids[r * stride] (argmax ids, stride 1,
// or RowSamples' tokens; -1 where the row's argmax or sampling failed).
struct ResultTokens {
  const int32_t* ids = nullptr;
  int64_t stride = 1;
};

// Overlapped steps: ids[fed[i].x] = max(0, src's id of row fed[i].y) for i < n (a failed row, -1,
// gets token 0: its step's results are thrown away).
cudaError_t feedTokens(int32_t* ids, const int2* fed, int32_t n, ResultTokens src, cudaStream_t stream);

// Samples one token per row of logits [rows, vocab] (cuda_sampling.cu): params[r] says how;
// penalties / masked are the step's lists the rows index into; the penalties and masks are
// written into the logits. out[r] gets the token (or the row's error) and logprobs.
// compact_ws (sampleCompactBytes(rows), or null): run the compact pass first — for at most 16
// rows, each with a top-k of at most 256 and no logprobs (sampleCompactApplies): many CTAs per
// row cut the vocabulary down to the union of its slices' top-k sets; same results.
// pending: the previous step's result, where rows with RowSampling::pending_src >= 0 read their
// pending token (unused, null, when no row has one).
// group_ctas > 0 (sampleGroupCtas): the row-group path instead — group_ctas CTAs per row, launched
// cooperatively, with group_ws (sampleGroupBytes) for their exchanges; any rows' controls. When the
// device refuses the cooperative launch the rows take one CTA each and *group_refused is set.
cudaError_t sampleRows(float* logits, int64_t ld, int64_t rows, int64_t vocab, const RowSampling* params,
                       const PenaltyToken* penalties, const int32_t* masked, ResultTokens pending, RowSample* out,
                       void* compact_ws, int group_ctas, void* group_ws, bool* group_refused, cudaStream_t stream);
// How many CTAs of the row-group kernel the current device keeps resident at once (0: no
// cooperative launch), and the CTAs per row it takes for `rows` rows (0: the path does not apply).
int sampleGroupCapacity();
int sampleGroupCtas(int64_t rows, int capacity);
size_t sampleGroupBytes(int64_t rows, int ctas);
bool sampleCompactApplies(const RowSampling* rows, int64_t n, int64_t vocab);
size_t sampleCompactBytes(int64_t rows);

// out[m, n] = x[m, k] W[n, k]^T (+ bias[n]) (with `accumulate`: out += that, out F32) for W in BF16 or
// F16 (w_dtype) and m <= kGemvMaxRows: a
// bandwidth-bound matrix-vector kernel reading x (F32 or w_dtype) directly; out F32 or w_dtype. Requires
// k % 8 == 0 and 16-byte aligned rows of x; gemvSupported says whether a call qualifies. `act`
// (not with accumulate or norm_out): out = act(each output rounded to out's type), the bits of the
// product followed by activation().
//
// An RMSNorm between two such products can be split over them (no kernel of its own), with the
// same bits as the three kernels (linearAdd, rmsNorm, the next product) give:
// - norm_out, on a product accumulating into the float32 residual [m, n]: it also writes
//   normed[r, j] = g[j] * residual[r, j] rounded to F32 or w_dtype (normed_half) and, per group q
//   of kGemvNormGroup consecutive columns, sums[r * parts + q] = the sum of the group's squared
//   residual entries (each square rounded, added in column order from 0; parts = ceil(n /
//   kGemvNormGroup));
// - norm_in, on the next product with x = those normed rows: each x entry becomes x * inv_rms
//   rounded to x's type again, the value rmsNorm() stores, where inv_rms = 1 / sqrt(ss / k + eps)
//   and ss adds the row's parts in rmsNorm()'s order (lane l of a warp adds the parts q = l,
//   l + 32, ... in order, then the warp's lanes by xor shuffles).
// The groups and every order are the same for any m, so a row's result does not depend on the
// rows beside it (as the plain kernel's does not).
constexpr int kGemvNormGroup = 8;
struct GemvNormIn {
  const float* sums = nullptr;  // [m, parts]
  int64_t parts = 0;
  float eps = 0.0f;
};
struct GemvNormOut {
  const float* g = nullptr;  // the norm's weights [n]
  void* normed = nullptr;
  bool normed_half = false;
  int64_t ld_normed = 0;
  float* sums = nullptr;  // [m, ceil(n / kGemvNormGroup)]
};
constexpr int64_t kGemvMaxRows = 8;
bool gemvSupported(const void* x, DType x_dtype, int64_t ld_x, int64_t m, int64_t k);
cudaError_t gemv(const void* x, DType x_dtype, int64_t ld_x, const void* w, DType w_dtype, int64_t m,
                 int64_t k, int64_t n, const float* bias, void* out, DType out_dtype, int64_t ld_out,
                 bool accumulate, cudaStream_t stream, const GemvNormIn* norm_in = nullptr,
                 const GemvNormOut* norm_out = nullptr, std::optional<Act> act = std::nullopt);

// 8-bit (W8A8) products (cuda_fp8.cu), `codes` F8_E4M3 or I8. w8a8QuantizeRows: each row of x
// (F32, BF16 or F16, row stride ld_x) quantized by core/fp8.h's or core/int8.h's rule into q [m, k]
// (codes, row stride k) and scales [m]. w8a8Gemv, for m <= kW8a8GemvMaxRows and k % 64 == 0
// (w8a8GemvSupported): out[m, n] = (q . codes_w^T) * (scales[row] * sw[n]) (+ bias[n]) on the
// tensor cores, out F32, BF16 or F16 (accumulate: out += that, F32); m <= row_warp_rows (at most
// 2) takes the row-per-warp kernel. w8a8ScaleOut: the same scaling
// and bias for sums computed without scales (sums [m, n], row stride ld_sums; float for E4M3,
// int32 for I8).
constexpr int64_t kW8a8GemvMaxRows = 8;
cudaError_t w8a8QuantizeRows(DType codes, const void* x, DType x_dtype, int64_t ld_x, int64_t m, int64_t k,
                             uint8_t* q, float* scales, cudaStream_t stream);
bool w8a8GemvSupported(int64_t m, int64_t k);
cudaError_t w8a8Gemv(DType codes, const uint8_t* q, const float* sx, int64_t m, int64_t k, const uint8_t* w,
                     const float* sw, int64_t n, const float* bias, void* out, DType out_dtype,
                     int64_t ld_out, bool accumulate, cudaStream_t stream, int row_warp_rows = 0);
cudaError_t w8a8ScaleOut(DType codes, const void* sums, int64_t ld_sums, int64_t m, int64_t n, const float* sx,
                         const float* sw, const float* bias, void* out, DType out_dtype, int64_t ld_out,
                         bool accumulate, cudaStream_t stream);

// W4A16 products of 4-bit weights (cuda_int4.cu; CudaBackend::loadInt4Weight's layout: codes packed
// 8 to a uint32 along k, scales and zero terms (2^23 + zero) [n, k / group] float32).
// int4Gemv (int4GemvSupported: x rows 16-byte aligned, k and group multiples of 32, and either
// 16-bit x with m <= kInt4GemvMmaRows and k, group multiples of 128 (the tensor-core kernel) or
// m <= kInt4GemvCudaCoreRows): out[m, n] = x W^T (+ bias), x F32 / BF16 / F16, out F32 / BF16 / F16
// (accumulate: out += that, F32). int4Dequantize: W [n, k] written in out_dtype.
constexpr int64_t kInt4GemvCudaCoreRows = 4;
constexpr int64_t kInt4GemvMmaRows = 32;
bool int4GemvSupported(int64_t m, int64_t k, int64_t group, const void* x, DType x_dtype, int64_t ld_x);
cudaError_t int4Gemv(const void* x, DType x_dtype, int64_t ld_x, int64_t m, const uint32_t* w, const float* scales,
                     const float* zeros, int64_t n, int64_t k, int64_t group, const float* bias, void* out,
                     DType out_dtype, int64_t ld_out, bool accumulate, cudaStream_t stream);
cudaError_t int4Dequantize(const uint32_t* w, const float* scales, const float* zeros, int64_t n, int64_t k,
                           int64_t group, void* out, DType out_dtype, cudaStream_t stream);

}  // namespace llmrt::cuda
