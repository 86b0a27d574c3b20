// Sampling on the device, the row-group path (see cuda_sampling.cu for the algorithm and its
// exactness): for steps of a few rows, many CTAs per row launched cooperatively.
#include "backend/cuda/cuda_sampling_common.cuh"

namespace llmrt::cuda {
namespace {

// The row-group path (groupSampleKernel): steps of at most kGroupMaxRows rows, each row cut into
// up to kGroupMaxCtas slices (fewer where the GPU cannot keep rows x slices CTAs resident).
constexpr int64_t kGroupMaxRows = 16;
constexpr int kGroupMaxCtas = 32;
constexpr int kGroupMinCtas = 8;

// ---- The row-group path: few rows, many CTAs per row --------------------------------------
// One CTA per row leaves most of the GPU idle when a step has a few rows (and its ~13 passes over
// a 128k vocabulary cost ~1 ms); the host takes ~0.17 ms a row. groupSampleKernel gives each row
// `ctas` CTAs, each owning a contiguous slice of the vocabulary, and runs the same algorithm
// with the slices' partial results exchanged through global memory between grid-wide barriers
// (a cooperative launch keeps every CTA resident): the max, the masses, each radix pass's
// histogram (summed over the slices in slice order), the tie scan's counts, the draw's sums.
// Fixed-point masses and counts are integers, so cuts equal the one-CTA kernel's; the draw's
// double sums run in a fixed order (a tree within each slice, then the slices in order; the owning
// slice narrows by segment sums): deterministic, equal to the host's pick (which sums in id order)
// except within ~1e-16 of a CDF boundary. Where the sums leave no crossing, the last positive
// token is drawn, as the host does. The softmax denominator is summed in the same kind of order.

// One CTA's contribution to one exchange.
struct GroupSlot {
  u64 hist[256];
  u64 u;
  double d;
  float f;
  int32_t i;
  int32_t j;
};

struct GroupView {
  GroupSlot* slots;  // [2][rows][ctas]: exchanges alternate between the halves
  u64* top;          // [rows][ctas][kMaxTop]: each slice's best tokens (order keys; ~0: none)
  int32_t* found;    // [rows]: a token found by one CTA for the row's others
  int32_t rows;
  int32_t ctas;
};

// A CTA's place in the grid. Each exchange: every CTA writes mine(), sync(), then reads of(h)
// for each of its row's slices before its next barrier. Every barrier flips the half written, so
// a slot is rewritten only after a further barrier, when every CTA has read it.
struct Group {
  GroupView v;
  int32_t row;
  int32_t g;
  int parity;
  __device__ GroupSlot& mine() const {
    return v.slots[(static_cast<int64_t>(parity) * v.rows + row) * v.ctas + g];
  }
  __device__ const GroupSlot& of(int h) const {
    return v.slots[(static_cast<int64_t>(parity ^ 1) * v.rows + row) * v.ctas + h];
  }
  // (The grid barrier orders memory: its arrival is a gpu-scope release after a CTA barrier, its
  // wait an acquire, so no fence of our own.)
  __device__ void sync() {
    cooperative_groups::this_grid().sync();
    parity ^= 1;
  }
};

// The row's slots' field, lane h of every warp reading slice h's (one L2 round trip, not one per
// slice); the sums below combine them by a shuffle tree, the same on every lane and CTA.
template <typename T, typename F>
__device__ __forceinline__ T slotField(const Group& grp, F field, T none) {
  const int h = threadIdx.x & 31;
  return h < grp.v.ctas ? __ldcg(field(grp.of(h))) : none;
}
template <typename T, typename F>
__device__ __forceinline__ T slotSum(const Group& grp, F field) {
  return warpSum(slotField<T>(grp, field, T(0)));
}

// sh.hist[b] = the sum of bin b over the row's slots' histograms: four quarters of the slices
// summed by 256 threads each (eight loads in flight), then added in quarter order.
__device__ void sumHistograms(const Group& grp, Shared& sh) {
  static_assert(kThreads == 4 * 256 && kGroupMaxCtas <= 32, "four quarters of at most eight slices");
  const int b = threadIdx.x & 255, q = threadIdx.x >> 8;
  u64 v[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int h = q * 8 + j;
    v[j] = h < grp.v.ctas ? __ldcg(&grp.of(h).hist[b]) : 0ull;
  }
  u64 t = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) t += v[j];
  sh.cand_fp[q * 256 + b] = t;  // (scratch: no candidates are held across a selection)
  __syncthreads();
  if (threadIdx.x < 256)
    sh.hist[b] = sh.cand_fp[b] + sh.cand_fp[256 + b] + sh.cand_fp[512 + b] + sh.cand_fp[768 + b];
  __syncthreads();
}

// selectCut over a row cut into the group's slices (`slice`: this CTA's, its ids from id0).
// Every CTA of the grid calls it (the barriers are grid-wide); `active` false: the row takes no
// part (returns Cut{}).
__device__ Cut groupSelectCut(const Row& slice, int64_t id0, bool active, const Cut& within, bool by_mass, u64 target,
                              Group& grp, Shared& sh) {
  uint32_t prefix = 0, mask = 0;
  bool found = active;
  for (int shift = 24; shift >= 0; shift -= 8) {
    if (found) {
      radixHistogram(slice, id0, within, by_mass, prefix, mask, shift, sh);
      for (int b = threadIdx.x; b < 256; b += kThreads) grp.mine().hist[b] = sh.hist[b];
    }
    grp.sync();
    if (found) {
      sumHistograms(grp, sh);
      found = radixStep(shift, prefix, mask, target, sh);
    }
  }
  // The tie: the r-th token of key `prefix` in id order, counted across the slices in order.
  auto equalValue = [&](int64_t i, float v) -> u64 {
    const uint32_t k = orderKey(v);
    return k == prefix && within.keeps(k, id0 + i) ? 1ull : 0ull;
  };
  auto equal = [&](int64_t i) { return equalValue(i, slice.x[i]); };
  if (found) {
    u64 c = 0;
    forEachValue(slice.x, slice.vocab, [&](int64_t i, float v) { c += equalValue(i, v); });
    c = blockSum(c, sh);
    if (threadIdx.x == 0) grp.mine().u = c;
  }
  grp.sync();
  if (found) {
    // Counts in slice order; the owner is the first slice whose running count reaches r.
    const u64 incl = warpInclusiveScan(slotField<u64>(grp, [](const GroupSlot& t) { return &t.u; }, 0ull));
    const u64 total = __shfl_sync(kFull, incl, 31);
    const u64 r0 = tieRank(slice, prefix, by_mass, target);
    const u64 r = r0 < total ? r0 : total;
    found = r > 0;
    u64 before;
    const int owner = firstLaneHit(incl >= r, incl, &before);
    if (found && owner == grp.g) {
      const int64_t local = firstReaching<u64, false>(slice.vocab, equal, [&](u64) { return r - before; }, sh);
      if (threadIdx.x == 0) grp.v.found[grp.row] = static_cast<int32_t>(id0 + local);
    }
  }
  grp.sync();
  Cut c;
  if (found) {
    c.on = true;
    c.key = prefix;
    c.id = __ldcg(&grp.v.found[grp.row]);
  }
  return c;
}

__global__ void __launch_bounds__(kThreads, 1)
    groupSampleKernel(float* logits, int64_t ld, int64_t vocab, const RowSampling* params,
                      const PenaltyToken* penalties, const int32_t* masked, ResultTokens pending, RowSample* out,
                      GroupView gv) {
  __shared__ Shared sh;
  Group grp{gv, static_cast<int32_t>(blockIdx.x / gv.ctas), static_cast<int32_t>(blockIdx.x % gv.ctas), 0};
  const RowSampling p = params[grp.row];
  float* x = logits + grp.row * ld;
  const int64_t per = (vocab + gv.ctas - 1) / gv.ctas;
  const int64_t id0 = min(vocab, grp.g * per), len = min(vocab, id0 + per) - id0;
  const float* xs = x + id0;
  auto truncatesK = [&](const RowSampling& q) { return !q.greedy && q.top_k > 0 && q.top_k < vocab; };
  auto truncatesP = [&](const RowSampling& q) { return !q.greedy && q.top_p < 1.0f; };
  // Which exchanges run: any row's controls decide, so every CTA takes the same barriers.
  bool any_sampled = false, any_k = false, any_p = false, any_kp = false, any_whole = false, any_lp = false;
  for (int r = 0; r < gv.rows; ++r) {
    const RowSampling& q = params[r];
    any_sampled |= !q.greedy;
    any_k |= truncatesK(q);
    any_p |= truncatesP(q);
    any_kp |= truncatesK(q) && truncatesP(q);
    any_whole |= !truncatesK(q) && truncatesP(q);
    any_lp |= q.num_logprobs >= 0;
  }

  // Penalties and the min_tokens mask, by the row's first CTA (the others read the row after).
  if (grp.g == 0) applyPenaltiesAndMask(p, x, vocab, penalties, masked, pending);
  grp.sync();

  // The max (first index of it) and the first NaN / +inf.
  {
    const MaxScan ms = blockMaxScan(xs, len, sh);
    if (threadIdx.x == 0) {
      grp.mine().f = ms.best;
      grp.mine().i = ms.best_i == 0x7fffffff ? 0x7fffffff : static_cast<int32_t>(id0 + ms.best_i);
      grp.mine().j = ms.bad == 0x7fffffff ? 0x7fffffff : static_cast<int32_t>(id0 + ms.bad);
    }
  }
  grp.sync();
  float best = slotField<float>(grp, [](const GroupSlot& t) { return &t.f; }, -INFINITY);
  int32_t best_i = slotField<int32_t>(grp, [](const GroupSlot& t) { return &t.i; }, 0x7fffffff);
  int32_t bad = slotField<int32_t>(grp, [](const GroupSlot& t) { return &t.j; }, 0x7fffffff);
  warpMaxMerge(best, best_i, bad);
  RowSample& o = out[grp.row];
  const bool ok = bad == 0x7fffffff && best != -INFINITY;
  if (!ok && grp.g == 0 && threadIdx.x == 0) writeRowError(o, bad, x);
  const bool sampled = ok && !p.greedy, cut_k = ok && truncatesK(p), cut_p = ok && truncatesP(p);
  const bool lp = ok && p.num_logprobs >= 0;
  const int32_t num_top = lp ? numTop(p, vocab) : 0;
  const Row slice{xs, len, best, sampled ? __fdiv_rn(1.0f, p.temperature) : 1.0f};

  // The whole row's mass (top-p without top-k), the softmax denominator and each slice's best
  // tokens (logprobs).
  u64 mass = 0;
  double z = 0.0;
  if (any_whole || any_lp) {
    if (cut_p && !cut_k) {
      const u64 m = keptMass(slice, id0, Cut{}, sh);
      if (threadIdx.x == 0) grp.mine().u = m;
    }
    if (lp) {
      double s = 0.0;
      forEachValue(xs, len, [&](int64_t, float v) { s += fastExpDev(__fsub_rn(v, best)); });
      s = blockSum(s, sh);
      if (threadIdx.x == 0) grp.mine().d = s;
      const int n_top = static_cast<int>(min(static_cast<int64_t>(num_top), len));
      if (n_top > 0) topTokens(Row{xs, len, best, 1.0f}, id0, n_top, sh);
      u64* top = gv.top + (static_cast<int64_t>(grp.row) * gv.ctas + grp.g) * RowSample::kMaxTop;
      if (threadIdx.x < RowSample::kMaxTop) top[threadIdx.x] = threadIdx.x < n_top ? sh.cand_fp[threadIdx.x] : ~0ull;
    }
    grp.sync();
    if (cut_p && !cut_k) mass = slotSum<u64>(grp, [](const GroupSlot& t) { return &t.u; });
    if (lp) z = slotSum<double>(grp, [](const GroupSlot& t) { return &t.d; });
  }

  // The top-k cut, then top-p's reference mass over what it keeps, then the top-p cut.
  Cut cut;
  if (any_k) cut = groupSelectCut(slice, id0, cut_k, Cut{}, false, static_cast<u64>(p.top_k), grp, sh);
  if (any_kp) {
    if (cut_k && cut_p) {
      const u64 m = keptMass(slice, id0, cut, sh);
      if (threadIdx.x == 0) grp.mine().u = m;
    }
    grp.sync();
    if (cut_k && cut_p) mass = slotSum<u64>(grp, [](const GroupSlot& t) { return &t.u; });
  }
  if (any_p) {
    const Cut pc = groupSelectCut(slice, id0, cut_p, cut, true, cut_p ? topPTarget(p.top_p, mass) : 0ull, grp, sh);
    if (pc.on) cut = pc;
  }

  // The draw: the first kept token (id order) whose cumulative weight exceeds u * total; each
  // slice's sum, then the slice holding the crossing walks its own tokens.
  int32_t token = best_i;
  if (any_sampled) {
    const float min_prob = minProb(p);
    auto weight = [&](int64_t i) -> double { return drawWeight(slice, cut, min_prob, id0 + i, xs[i]); };
    int64_t last = -1;  // this slice's last positive weight
    if (sampled) {
      double s = 0.0;
      forEachValue(xs, len, [&](int64_t i, float v) {
        const double w = drawWeight(slice, cut, min_prob, id0 + i, v);
        s += w;
        if (w > 0.0) last = i;  // (ascending per thread)
      });
      s = blockSum(s, sh);
      last = blockLastIndex(last, len, sh);
      if (threadIdx.x == 0) {
        grp.mine().d = s;
        grp.mine().i = last >= 0 ? static_cast<int32_t>(id0 + last) : -1;
      }
    }
    grp.sync();
    int owner = -1;
    if (sampled) {
      // Sums in slice order (an inclusive scan); the owner: the first positive slice whose running
      // sum exceeds the target.
      const double d = slotField<double>(grp, [](const GroupSlot& t) { return &t.d; }, 0.0);
      int32_t last_any = slotField<int32_t>(grp, [](const GroupSlot& t) { return &t.i; }, -1);
      for (int o = 16; o > 0; o >>= 1) last_any = max(last_any, __shfl_xor_sync(kFull, last_any, o));
      const double incl = warpInclusiveScan(d);
      const double target = philoxUniform(p.seed, p.step, p.sample_index) * __shfl_sync(kFull, incl, 31);
      double cum;
      owner = firstLaneHit(d > 0.0 && incl > target, incl, &cum);
      if (owner == grp.g) {
        const int64_t t = firstReaching<double, true>(len, weight, [&](double) { return target - cum; }, sh);
        if (threadIdx.x == 0) grp.v.found[grp.row] = static_cast<int32_t>(id0 + (t >= 0 ? t : last));
      }
      if (owner < 0 && last_any >= 0) token = last_any;  // rounding left the sum a hair below
    }
    grp.sync();
    if (owner >= 0) token = __ldcg(&grp.v.found[grp.row]);
  }

  // Logprobs of the processed logits at temperature 1: the rank counted across the slices, the
  // best tokens merged from the slices' lists.
  if (any_lp) {
    const float chosen = lp ? x[token] : 0.0f;
    if (lp) {
      u64 greater = 0;
      forEachValue(xs, len, [&](int64_t, float v) { greater += v > chosen; });
      greater = blockSum(greater, sh);
      if (threadIdx.x == 0) grp.mine().u = greater;
    }
    grp.sync();
    if (lp && grp.g == 0) {
      const u64 greater = slotSum<u64>(grp, [](const GroupSlot& t) { return &t.u; });
      const float log_z = static_cast<float>(log(z));
      static_assert(kGroupMaxCtas * RowSample::kMaxTop <= kMaxCandidates, "the slices' lists fit one sort");
      const int n = gv.ctas * RowSample::kMaxTop;
      const u64* top = gv.top + static_cast<int64_t>(grp.row) * n;
      for (int j = threadIdx.x; j < n; j += kThreads) sh.cand_fp[j] = __ldcg(&top[j]);
      sortKeys(n, sh);
      if (threadIdx.x < num_top) {
        const u64 t = sh.cand_fp[threadIdx.x];
        o.top_ids[threadIdx.x] = orderId(t);
        o.top_logprobs[threadIdx.x] = __fsub_rn(__fsub_rn(orderValue(t), best), log_z);
      }
      if (threadIdx.x == 0) {
        o.logprob = __fsub_rn(__fsub_rn(chosen, best), log_z);
        o.rank = static_cast<int32_t>(greater) + 1;
      }
    }
  }
  if (ok && grp.g == 0 && threadIdx.x == 0) writeRowOk(o, token, num_top);
}

}  // namespace

int sampleGroupCapacity() {
  int dev = 0, coop = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, groupSampleKernel, kThreads, 0) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return coop ? sms * per_sm : 0;
}

int sampleGroupCtas(int64_t rows, int capacity) {
  if (rows < 1 || rows > kGroupMaxRows) return 0;
  const int ctas = static_cast<int>(std::min<int64_t>(kGroupMaxCtas, capacity / rows));
  return ctas >= kGroupMinCtas ? ctas : 0;
}

// The row-group kernel's workspace at `base` (views null when base is), its size in *bytes.
GroupView groupLayout(int64_t rows, int ctas, void* base, size_t* bytes) {
  const size_t slots = static_cast<size_t>(rows) * static_cast<size_t>(ctas);
  const size_t top_at = 2 * slots * sizeof(GroupSlot), found_at = top_at + slots * RowSample::kMaxTop * sizeof(u64);
  char* w = static_cast<char*>(base);
  GroupView gv{};
  if (w != nullptr) {
    gv.slots = reinterpret_cast<GroupSlot*>(w);
    gv.top = reinterpret_cast<u64*>(w + top_at);
    gv.found = reinterpret_cast<int32_t*>(w + found_at);
  }
  gv.rows = static_cast<int32_t>(rows);
  gv.ctas = ctas;
  if (bytes != nullptr) *bytes = found_at + static_cast<size_t>(rows) * 4;
  return gv;
}

size_t sampleGroupBytes(int64_t rows, int ctas) {
  size_t bytes = 0;
  groupLayout(rows, ctas, nullptr, &bytes);
  return bytes;
}

cudaError_t launchGroupSample(float* logits, int64_t ld, int64_t rows, int64_t vocab, const RowSampling* params,
                              const PenaltyToken* penalties, const int32_t* masked, ResultTokens pending,
                              RowSample* out, int group_ctas, void* group_ws, cudaStream_t stream) {
  GroupView gv = groupLayout(rows, group_ctas, group_ws, nullptr);
  void* args[] = {&logits, &ld, &vocab, &params, &penalties, &masked, &pending, &out, &gv};
  return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&groupSampleKernel),
                                     dim3(static_cast<unsigned>(rows * group_ctas)), dim3(kThreads), args, 0, stream);
}

}  // namespace llmrt::cuda
