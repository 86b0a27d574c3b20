// CudaBackend::moeAdd, host side: argument checks, the choice of path, the workspace and the
// launches of cuda_moe.h's kernels (the design is described there and in cuda_moe.cu /
// cuda_moe_gemm.cu). Nothing here waits for the device or depends on the routing's outcome: the
// grids cover the most work a step of T tokens can have, so a recorded step replays with any
// routing.
//
// Paths, per chunk of tokens (below):
//   - matrix-vector (decode-sized): 16-bit weights, hidden and inter multiples of 8, x rows
//     16-byte aligned, at most kMoeGemvMaxSlots slots, tuning gemv on: route + group in one block,
//     the gate/up product with act(gate) * up, the down product with the weighted top-k sum added
//     to the residual. Each chosen expert's rows are read once.
//   - grouped products on tensor cores: 16-bit weights, hidden and inter multiples of 8: route,
//     sort into tiles, [x of float32 to 16 bits], the gated product, the down product into
//     y[slot] (weighted), the combine. With float32 activations (a float32 KV cache) x and the
//     intermediate activations go in as 16-bit hi + lo parts, as linear() does.
//   - grouped products on CUDA cores: everything else (F32 weights, odd sizes), float32 throughout.
//
// Workspace (moe_ws_, one PoolBuffer): the routing and grouping arrays, x in 16 bits, the
// activations between the products and y, for a chunk of tokens. It is grown only outside a
// recording, at the first call, for steps of up to max(T, reserveWorkspace's max_tokens) tokens but
// no more than kMoeWorkspaceBudget bytes; a step of more tokens runs in chunks of what the buffer
// holds (also while recording, when it was sized for fewer tokens).
#include <algorithm>
#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_moe.h"
#include "core/logging.h"

namespace llmrt {
namespace {

constexpr size_t kMoeWorkspaceBudget = size_t{512} << 20;

bool isHalf(DType d) { return d == DType::kBF16 || d == DType::kF16; }
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
size_t align256(int64_t bytes) { return (static_cast<size_t>(bytes) + 255) / 256 * 256; }
float* f32(const TensorView& t) { return static_cast<float*>(t.data); }
long long rowBucket(int64_t m) {
  long long b = 1;
  while (b < m) b *= 2;
  return b;
}

std::string dims(int64_t r, int64_t c) {
  return strprintf("[%lld, %lld]", static_cast<long long>(r), static_cast<long long>(c));
}

struct MoeDims {
  int64_t experts, top_k, hidden, inter;
  int64_t a_row_bytes;  // one slot's activations between the products
  int64_t x_row_bytes;  // one token's x in 16 bits (parts included); 0: x is read in place
};

// Where each array of a chunk of `tokens` tokens lies in the workspace (byte offsets).
struct MoeLayout {
  size_t header = 0, slot_weight = 0, sorted_slot = 0, slot_expert = 0, bits = 0, counts = 0, tiles = 0, groups = 0,
         xh = 0, a = 0, y = 0, end = 0;
};

MoeLayout moeLayout(const MoeDims& d, int64_t tokens) {
  const int64_t S = tokens * d.top_k, words = (tokens + 31) / 32;
  MoeLayout l;
  size_t at = 0;
  auto take = [&](int64_t bytes) {
    const size_t here = at;
    at += align256(bytes);
    return here;
  };
  l.header = take(16);
  l.slot_weight = take(4 * S);
  l.sorted_slot = take(4 * S);
  l.slot_expert = take(4 * S);
  l.bits = take(4 * d.experts * words);
  l.counts = take(4 * d.experts);
  l.tiles = take(16 * cuda::moeMaxTiles(S, d.experts));
  l.groups = take(16 * std::min(d.experts, S));
  l.xh = take(tokens * d.x_row_bytes);
  l.a = take(S * d.a_row_bytes);
  l.y = take(S * d.hidden * 4);
  l.end = at;
  return l;
}

// The most tokens, at most `most`, whose layout fits in `bytes`; 0 when not even one token's does.
int64_t tokensWithin(const MoeDims& d, size_t bytes, int64_t most) {
  int64_t lo = 0, hi = most;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (moeLayout(d, mid).end <= bytes)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace

void CudaBackend::moeAdd(const TensorView& x, const TensorView& logits, const TensorView& gate_up,
                         const TensorView& down, const MoeRouting& routing, Activation act, TensorView residual) {
  if (failed()) return;
  if (!checkActivation("moeAdd x", x) || !checkDtypes("moeAdd router_logits", logits, DType::kF32) ||
      !checkDtypes("moeAdd residual", residual, DType::kF32) || !checkActivation("moeAdd experts_gate_up", gate_up) ||
      !checkDtypes("moeAdd experts_down", down, gate_up.dtype))
    return;
  const int64_t T = viewRows(x), H = viewCols(x), E = routing.num_experts, K = routing.top_k;
  if (E < 1 || E > cuda::kMoeMaxExperts || K < 1 || K > std::min<int64_t>(E, cuda::kMoeMaxTopK)) {
    fail(invalidArgument("moeAdd: num_experts " + std::to_string(E) + ", top_k " + std::to_string(K) +
                         "; expected 1 <= num_experts <= " + std::to_string(cuda::kMoeMaxExperts) +
                         " and 1 <= top_k <= min(num_experts, " + std::to_string(cuda::kMoeMaxTopK) + ")"));
    return;
  }
  const int64_t I = down.shape.rank() == 2 ? down.shape[1] : 0;
  if (gate_up.shape.rank() != 2 || I < 1 || gate_up.shape[0] != 2 * E * I || gate_up.shape[1] != H ||
      down.shape[0] != E * H || viewRows(logits) != T || viewCols(logits) != E || viewRows(residual) != T ||
      viewCols(residual) != H) {
    fail(invalidArgument("moeAdd: x " + dims(T, H) + ", router_logits " + dims(viewRows(logits), viewCols(logits)) +
                         ", experts_gate_up " + gate_up.shape.toString() + ", experts_down " + down.shape.toString() +
                         ", residual " + dims(viewRows(residual), viewCols(residual)) + " with " +
                         std::to_string(E) + " experts; expected router_logits [T, num_experts], experts_gate_up "
                         "[num_experts * 2 * inter, hidden], experts_down [num_experts * hidden, inter] and "
                         "residual [T, hidden]"));
    return;
  }
  const DType wd = gate_up.dtype;
  // A 16-bit x must be of the weights' type (the products take one operand type).
  if (isHalf(wd) && x.dtype != DType::kF32 && !checkDtypes("moeAdd x (16-bit weights)", x, wd)) return;
  if (T == 0) return;

  const int64_t ld_x = viewRowStride(x), ld_l = viewRowStride(logits), ld_r = viewRowStride(residual);
  const bool x_half = x.dtype != DType::kF32;
  const bool x_vec = aligned16(x.data) && ld_x % (x_half ? 8 : 4) == 0;
  const bool tensor = isHalf(wd) && H % 8 == 0 && I % 8 == 0 && aligned16(gate_up.data) && aligned16(down.data) &&
                      (!x_half || x_vec);
  const bool f32_acts = activation_dtype_ == DType::kF32;
  const int a_parts = tensor && f32_acts ? 2 : 1;                  // the gated product's output parts
  const int x_parts = tensor && !x_half ? (f32_acts ? 2 : 1) : 0;  // x converted first (0: read in place)
  const MoeDims d{E, K, H, I, tensor ? I * 2 * a_parts : I * 4, x_parts * H * 2};

  // The workspace: sized once, outside recording, for the largest step expected (within the budget).
  const int64_t want = std::max(T, moe_max_tokens_);
  const int64_t budget_tokens = std::max<int64_t>(1, tokensWithin(d, kMoeWorkspaceBudget, want));
  if (!graphs_.recording() && !reserve(moe_ws_, moeLayout(d, std::min(want, budget_tokens)).end)) return;
  const int64_t chunk = tokensWithin(d, moe_ws_.bytes(), T);
  if (chunk == 0) {  // (recording into a workspace too small for one token: fails the recording)
    reserve(moe_ws_, moeLayout(d, 1).end);
    return;
  }

  const cuda::Act a = toCudaAct(act);
  for (int64_t t0 = 0; t0 < T; t0 += chunk) {
    const int64_t tc = std::min(chunk, T - t0), S = tc * K;
    const bool gemv = tensor && x_vec && !(x_half && f32_acts) && tuning().gemv && S <= cuda::kMoeGemvMaxSlots;
    OpScope scope(this, [&] {
      return strprintf("moeAdd %s T<=%lld E=%lld k=%lld h=%lld i=%lld",
                       gemv ? "gemv" : (tensor ? "mma" : "simt"), rowBucket(tc), static_cast<long long>(E),
                       static_cast<long long>(K), static_cast<long long>(H), static_cast<long long>(I));
    });
    const MoeLayout L = moeLayout(d, tc);
    uint8_t* ws = static_cast<uint8_t*>(moe_ws_.get());
    cuda::MoePlan plan;
    plan.header = reinterpret_cast<int32_t*>(ws + L.header);
    plan.slot_weight = reinterpret_cast<float*>(ws + L.slot_weight);
    plan.sorted_slot = reinterpret_cast<int32_t*>(ws + L.sorted_slot);
    plan.slot_expert = reinterpret_cast<int32_t*>(ws + L.slot_expert);
    plan.bits = reinterpret_cast<uint32_t*>(ws + L.bits);
    plan.counts = reinterpret_cast<int32_t*>(ws + L.counts);
    plan.tiles = reinterpret_cast<int4*>(ws + L.tiles);
    plan.groups = reinterpret_cast<int4*>(ws + L.groups);
    cuda::MoeRoute route;
    route.logits = f32(logits) + t0 * ld_l;
    route.ld = ld_l;
    route.tokens = tc;
    route.experts = static_cast<int32_t>(E);
    route.top_k = static_cast<int32_t>(K);
    route.renormalize = routing.renormalize;
    const void* xs = static_cast<const uint8_t*>(x.data) + t0 * ld_x * static_cast<int64_t>(dtypeSize(x.dtype));
    float* res = f32(residual) + t0 * ld_r;
    void* acts = ws + L.a;

    if (gemv) {
      LLMRT_CUDA_OP_CHECK(cuda::moeRouteSmall(route, plan, stream_.get()));
      cuda::MoeGemvArgs g;
      g.x = xs;
      g.x_dtype = x.dtype;
      g.ld_x = ld_x;
      g.w = gate_up.data;
      g.w_dtype = wd;
      g.hidden = H;
      g.inter = I;
      g.tokens = tc;
      g.top_k = static_cast<int32_t>(K);
      g.max_groups = static_cast<int32_t>(std::min(E, S));
      g.header = plan.header;
      g.groups = plan.groups;
      g.sorted_slot = plan.sorted_slot;
      g.slot_weight = plan.slot_weight;
      g.a = acts;
      g.a_dtype = f32_acts ? DType::kF32 : wd;
      g.act = a;
      g.residual = res;
      g.ld_res = ld_r;
      LLMRT_CUDA_OP_CHECK(cuda::moeGemvUp(g, stream_.get()));
      g.w = down.data;
      LLMRT_CUDA_OP_CHECK(cuda::moeGemvDown(g, stream_.get()));
      continue;
    }

    LLMRT_CUDA_OP_CHECK(cuda::moeRoute(route, plan, stream_.get()));
    LLMRT_CUDA_OP_CHECK(cuda::moePlanTiles(route, plan, stream_.get()));
    cuda::MoeGemm up;
    up.header = plan.header;
    up.tiles = plan.tiles;
    up.max_tiles = cuda::moeMaxTiles(S, E);
    up.sorted_slot = plan.sorted_slot;
    up.slot_weight = plan.slot_weight;
    up.a[0] = xs;
    up.a_dtype = x.dtype;
    up.ld_a = ld_x;
    if (x_parts > 0) {  // x in 16 bits (hi and lo parts with float32 activations), contiguous
      void* hi = ws + L.xh;
      void* lo = ws + L.xh + static_cast<size_t>(tc * H * 2);
      const float* xf = static_cast<const float*>(xs);
      if (x_parts == 2)
        LLMRT_CUDA_OP_CHECK(cuda::splitToHalf(xf, ld_x, tc, H, hi, lo, wd, stream_.get()));
      else
        LLMRT_CUDA_OP_CHECK(cuda::toHalf(xf, ld_x, tc, H, hi, wd, stream_.get()));
      up.a[0] = hi;
      up.a[1] = lo;
      up.a_parts = x_parts;
      up.a_dtype = wd;
      up.ld_a = H;
    }
    up.gather_k = static_cast<int32_t>(K);
    up.w = gate_up.data;
    up.w_dtype = wd;
    up.w_rows = 2 * I;
    up.kdim = H;
    up.n = I;
    up.gated = true;
    up.act = a;
    up.out[0] = acts;
    up.out[1] = static_cast<uint8_t*>(acts) + static_cast<size_t>(S * I * 2);
    up.out_parts = tensor ? a_parts : 1;
    up.ld_out = I;
    LLMRT_CUDA_OP_CHECK(cuda::moeGemm(up, tensor, stream_.get()));

    cuda::MoeGemm dn = up;
    dn.a[0] = up.out[0];
    dn.a[1] = up.out[1];
    dn.a_parts = up.out_parts;
    dn.a_dtype = tensor ? wd : DType::kF32;
    dn.ld_a = I;
    dn.gather_k = 0;
    dn.w = down.data;
    dn.w_rows = H;
    dn.kdim = I;
    dn.n = H;
    dn.gated = false;
    float* y = reinterpret_cast<float*>(ws + L.y);
    dn.out[0] = y;
    dn.out[1] = nullptr;
    dn.out_parts = 1;
    dn.ld_out = H;
    LLMRT_CUDA_OP_CHECK(cuda::moeGemm(dn, tensor, stream_.get()));
    LLMRT_CUDA_OP_CHECK(cuda::moeCombine(y, tc, H, static_cast<int32_t>(K), res, ld_r, stream_.get()));
  }
}

}  // namespace llmrt
