// Sampling on the device (Backend::sampleRows): one CTA per logits row (or, for steps
// of a few rows, many CTAs per row: the row-group kernel below) does what the host
// Sampler (src/sampling/sampler.cpp) does for one sequence, so only the token (and
// requested logprobs) cross to the host:
//   penalties and min_tokens masks in place -> max / validity scan -> greedy argmax,
//   or temperature probabilities, top-k cut, top-p cut, min-p, inverse-CDF draw
//   with the Philox uniform of (seed, step, sample index) -> logprobs.
//
// Exactness: the probabilities use the host's exponential operation for operation
// (no FMA contraction), so they are bit-identical to the host's. Masses are summed
// for the top-p cut in 2^-40 fixed point, each probability rounded to nearest (integer
// sums, independent of order); the draw sums the float probabilities in double as the
// host does — in id order on the candidate path (exactly the host's sum), else in a
// fixed tree order — so a row samples the same token on every run.
// (A fixed-point draw moved one draw in ~2,000 to a neighbouring token at a 128k
// vocabulary: the probabilities below 2^-41 that it drops add up.) The kept set under top-k is exact
// (logit order, ties to the lower id); top-p and the draw agree with the host except
// where a boundary falls within ~1e-12 of the target (a token whose probability is
// below 2^-40 of the top one is never drawn).
//
// Selection without sorting: the k-th token in (logit desc, id asc) order, or the
// token where the descending-order mass reaches a target, is found by a 4-pass radix
// select over an order-preserving 32-bit key (256-bin shared histograms), then a
// scan over the equal-keyed tokens in id order for the tie. A vocabulary of 128k
// tokens costs one pass for greedy and up to ~13 passes (L2-resident) with top-k,
// top-p and logprobs together.
//
// This file: the one-CTA-per-row kernel and the compact pass, and sampleRows; the row-group path
// is in cuda_sampling_group.cu, the device helpers both use in cuda_sampling_common.cuh.
#include "backend/cuda/cuda_sampling_common.cuh"

namespace llmrt::cuda {
namespace {

// The compact pass, part 1 (one CTA per row): penalties and masks in place.
__global__ void __launch_bounds__(kThreads) prepareKernel(float* logits, int64_t ld, int64_t vocab,
                                                          const RowSampling* params, const PenaltyToken* penalties,
                                                          const int32_t* masked, ResultTokens pending) {
  applyPenaltiesAndMask(params[blockIdx.x], logits + blockIdx.x * ld, vocab, penalties, masked, pending);
}

// The compact pass, part 2 (grid kCompactCtas x rows): slice blockIdx.x of row blockIdx.y keeps its
// top-k tokens (logit desc, id asc), sorted by id, and says whether it saw a NaN or +inf.
__global__ void __launch_bounds__(kThreads) compactKernel(const float* logits, int64_t ld, int64_t vocab,
                                                          const RowSampling* params, CompactView cv) {
  __shared__ Shared sh;
  const int64_t row = blockIdx.y, g = blockIdx.x;
  const int32_t k = params[row].top_k;  // (1..kCompactMaxK: sampleCompactApplies)
  const int64_t per = (vocab + kCompactCtas - 1) / kCompactCtas;
  const int64_t begin = min(vocab, g * per), len = min(vocab, begin + per) - begin;
  const Row slice{logits + row * ld + begin, len, 0.0f, 1.0f};
  int32_t bad = 0;
  forEachValue(slice.x, len, [&](int64_t, float v) { bad |= !(v < INFINITY); });
  bad = blockSum(bad, sh);
  const Cut cut = len > k ? selectCut(slice, Cut{}, false, static_cast<u64>(k), sh) : Cut{};
  const int n = min(gatherById(slice, cut, kCompactMaxK, sh), kCompactMaxK);  // (the cut keeps min(k, len))
  const int64_t seg = (row * kCompactCtas + g) * kCompactMaxK;
  for (int j = threadIdx.x; j < n; j += kThreads) {
    cv.seg_val[seg + j] = sh.cand_val[j];
    cv.seg_id[seg + j] = static_cast<int32_t>(begin) + sh.cand_id[j];
  }
  if (threadIdx.x == 0) {
    cv.seg_count[row * kCompactCtas + g] = n;
    cv.seg_bad[row * kCompactCtas + g] = bad != 0;
  }
}

__global__ void __launch_bounds__(kThreads) sampleKernel(float* logits, int64_t ld, int64_t vocab,
                                                         const RowSampling* params, const PenaltyToken* penalties,
                                                         const int32_t* masked, ResultTokens pending,
                                                         RowSample* out, CompactView cv, bool use_compact) {
  __shared__ Shared sh;
  const RowSampling p = params[blockIdx.x];
  float* x = logits + blockIdx.x * ld;
  const CompactView* compact = use_compact ? &cv : nullptr;

  // 1-2. Penalties, then the min_tokens mask (done by the compact pass when there is one).
  if (compact == nullptr) applyPenaltiesAndMask(p, x, vocab, penalties, masked, pending);

  // The compact pass (small batches, every row with a small top-k): the union of every slice's
  // top-k holds the row's top-k, its max and everything the draw reads; work on it, in id order,
  // unless a slice saw a NaN / +inf (then the full row reports it).
  const int32_t* ids = nullptr;
  const float* xs = x;
  int64_t n = vocab;
  if (compact != nullptr) {
    const int32_t* counts = compact->seg_count + blockIdx.x * kCompactCtas;
    if (threadIdx.x == 0) {
      int32_t off = 0, any_bad = 0;
      for (int g = 0; g < kCompactCtas; ++g) {
        sh.warp_i32[g] = off;
        off += counts[g];
        any_bad |= compact->seg_bad[blockIdx.x * kCompactCtas + g];
      }
      sh.result = any_bad ? -1 : off;
    }
    __syncthreads();
    const int32_t total = sh.result;
    if (total >= 0) {
      float* row_val = compact->row_val + static_cast<int64_t>(blockIdx.x) * kCompactCap;
      int32_t* row_id = compact->row_id + static_cast<int64_t>(blockIdx.x) * kCompactCap;
      for (int g = 0; g < kCompactCtas; ++g) {
        const int64_t seg = (static_cast<int64_t>(blockIdx.x) * kCompactCtas + g) * kCompactMaxK;
        for (int32_t j = threadIdx.x; j < counts[g]; j += kThreads) {
          row_val[sh.warp_i32[g] + j] = compact->seg_val[seg + j];
          row_id[sh.warp_i32[g] + j] = compact->seg_id[seg + j];
        }
      }
      __syncthreads();  // (makes the block's global writes visible to the block)
      xs = row_val;
      ids = row_id;
      n = total;
    }
    __syncthreads();
  }

  // Max (first index of it) and the first NaN / +inf.
  const MaxScan ms = blockMaxScan(xs, n, sh);
  float best = ms.best;
  int32_t best_i = ms.best_i;
  const int32_t bad = ms.bad;
  RowSample& o = out[blockIdx.x];
  if (bad != 0x7fffffff || best == -INFINITY) {
    if (threadIdx.x == 0) writeRowError(o, bad, xs);
    return;
  }

  Row row{xs, n, best, 1.0f};
  int32_t token = best_i;
  if (!p.greedy) {
    row.inv_t = __fdiv_rn(1.0f, p.temperature);
    Cut cut;
    const bool top_k = p.top_k > 0 && p.top_k < n;
    if (top_k) cut = selectCut(row, Cut{}, false, static_cast<u64>(p.top_k), sh);
    const bool small_k = top_k && p.top_k <= kMaxCandidates, top_p = p.top_p < 1.0f;
    // Top-p's reference mass over the kept set: one pass, shared by both paths (a small top-k
    // set's mass the candidate path sums itself).
    u64 mass = top_p && !small_k ? keptMass(row, 0, cut, sh) : 0ull;
    const int32_t drawn = small_k || top_p ? drawFromCandidates(row, cut, small_k, mass, p, sh) : -2;
    if (drawn != -2) {
      token = drawn >= 0 ? drawn : best_i;
    } else {
      if (top_p) {
        if (small_k) mass = keptMass(row, 0, cut, sh);
        const Cut pc = selectCut(row, cut, true, topPTarget(p.top_p, mass), sh);
        if (pc.on) cut = pc;
      }
      const float min_prob = minProb(p);
      const double u = philoxUniform(p.seed, p.step, p.sample_index);
      const int64_t t = firstReaching<double, true>(
          n, [&](int64_t i) -> double { return drawWeight(row, cut, min_prob, i, xs[i]); },
          [&](double total) { return u * total; }, sh);
      token = t >= 0 ? static_cast<int32_t>(t) : best_i;
    }
  }

  // Logprobs of the processed logits at temperature 1.
  int32_t num_top = 0;
  float log_z = 0.0f;
  if (p.num_logprobs >= 0) {
    const float chosen = xs[token];
    double z = 0.0;
    int32_t greater = 0;
    forEachValue(xs, n, [&](int64_t, float v) {
      z += fastExpDev(__fsub_rn(v, best));
      greater += v > chosen;
    });
    z = blockSum(z, sh);
    greater = blockSum(greater, sh);
    log_z = static_cast<float>(log(z));
    if (threadIdx.x == 0) {
      o.logprob = __fsub_rn(__fsub_rn(chosen, best), log_z);
      o.rank = greater + 1;
    }
    num_top = numTop(p, n);
    if (num_top > 0) {
      topTokens(Row{xs, n, best, 1.0f}, 0, num_top, sh);
      if (threadIdx.x < num_top) {
        const u64 t = sh.cand_fp[threadIdx.x];
        o.top_ids[threadIdx.x] = ids != nullptr ? ids[orderId(t)] : orderId(t);
        o.top_logprobs[threadIdx.x] = __fsub_rn(__fsub_rn(orderValue(t), best), log_z);
      }
    }
  }
  if (threadIdx.x == 0) writeRowOk(o, ids != nullptr ? ids[token] : token, num_top);
}

}  // namespace


bool sampleCompactApplies(const RowSampling* rows, int64_t n, int64_t vocab) {
  if (n < 1 || n > kCompactMaxRows || vocab < kCompactCtas) return false;
  for (int64_t r = 0; r < n; ++r) {
    const RowSampling& p = rows[r];
    const bool small_k = p.top_k >= 1 && p.top_k <= kCompactMaxK && p.top_k < vocab;
    if (p.greedy || !small_k || p.num_logprobs >= 0) return false;
  }
  return true;
}

// The compact pass's workspace for `rows` rows at `base` (null: only its size).
CompactView compactLayout(int64_t rows, void* base, size_t* bytes) {
  const size_t segs = static_cast<size_t>(rows) * kCompactCtas;
  const size_t seg_vals = segs * kCompactMaxK, row_vals = static_cast<size_t>(rows) * kCompactCap;
  char* w = static_cast<char*>(base);
  CompactView cv{};
  if (w != nullptr) {
    cv.seg_val = reinterpret_cast<float*>(w);
    cv.seg_id = reinterpret_cast<int32_t*>(w + seg_vals * 4);
    cv.seg_count = reinterpret_cast<int32_t*>(w + seg_vals * 8);
    cv.seg_bad = cv.seg_count + segs;
    cv.row_val = reinterpret_cast<float*>(w + seg_vals * 8 + segs * 8);
    cv.row_id = reinterpret_cast<int32_t*>(w + seg_vals * 8 + segs * 8 + row_vals * 4);
  }
  if (bytes != nullptr) *bytes = seg_vals * 8 + segs * 8 + row_vals * 8;
  return cv;
}

size_t sampleCompactBytes(int64_t rows) {
  size_t bytes = 0;
  compactLayout(rows, nullptr, &bytes);
  return bytes;
}

cudaError_t sampleRows(float* logits, int64_t ld, int64_t rows, int64_t vocab, const RowSampling* params,
                       const PenaltyToken* penalties, const int32_t* masked, ResultTokens pending, RowSample* out,
                       void* compact_ws, int group_ctas, void* group_ws, bool* group_refused, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (group_ctas > 0) {
    const cudaError_t e = launchGroupSample(logits, ld, rows, vocab, params, penalties, masked, pending, out, group_ctas,
                                            group_ws, stream);
    // Refused (e.g. fewer SMs free than the device reports, under MPS): one CTA per row instead.
    if (e != cudaErrorCooperativeLaunchTooLarge) return e;
    cudaGetLastError();
    if (group_refused != nullptr) *group_refused = true;
  }
  const CompactView cv = compactLayout(rows, compact_ws, nullptr);
  if (compact_ws != nullptr) {
    prepareKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, ld, vocab, params, penalties, masked,
                                                                         pending);
    compactKernel<<<dim3(kCompactCtas, static_cast<unsigned>(rows)), kThreads, 0, stream>>>(logits, ld, vocab, params,
                                                                                             cv);
  }
  sampleKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, ld, vocab, params, penalties, masked,
                                                                    pending, out, cv, compact_ws != nullptr);
  return cudaGetLastError();
}

}  // namespace llmrt::cuda
