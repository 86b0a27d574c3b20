// CpuBackend mixture-of-experts ops (float32, the reference): routing as transformers' Mixtral
// and Qwen2-MoE blocks do it (softmax in float32, top-k, optional renormalization), then each
// expert's gated MLP over the tokens routed to it, weighted and added to the residual.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_util.h"

namespace llmrt {
using cpu::activate;
using cpu::cols;
using cpu::rowStride;
using cpu::rows;

void CpuBackend::moeAdd(const TensorView& x, const TensorView& router_logits, const TensorView& experts_gate_up,
                        const TensorView& experts_down, const MoeRouting& routing, Activation act,
                        TensorView residual) {
  const int64_t T = rows(x), H = cols(x), E = routing.num_experts, K = routing.top_k;
  const int64_t I = experts_down.shape[1];
  if (T == 0) return;
  // 1. Routing: per token the top-k experts and their weights.
  std::vector<int32_t> chosen(static_cast<size_t>(T * K));
  std::vector<float> weight(static_cast<size_t>(T * K));
  std::vector<float> prob(static_cast<size_t>(E));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* l = router_logits.as<const float>() + t * rowStride(router_logits);
    const float mx = *std::max_element(l, l + E);
    float sum = 0.0f;
    for (int64_t e = 0; e < E; ++e) sum += prob[static_cast<size_t>(e)] = std::exp(l[e] - mx);
    for (float& p : prob) p /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return prob[a] > prob[b]; });
    float chosen_sum = 0.0f;
    for (int64_t k = 0; k < K; ++k) chosen_sum += prob[static_cast<size_t>(order[static_cast<size_t>(k)])];
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = order[static_cast<size_t>(k)];
      chosen[static_cast<size_t>(t * K + k)] = e;
      weight[static_cast<size_t>(t * K + k)] = routing.renormalize ? prob[static_cast<size_t>(e)] / chosen_sum
                                                                   : prob[static_cast<size_t>(e)];
    }
  }
  // 2. Each expert over its tokens: gather, [gate | up] product, act(gate) * up, down product.
  std::vector<float> xs, gu, a, y;
  std::vector<int64_t> toks, slots;
  // Token t's expert outputs, weighted, kept per (t, k) so the sum runs in top-k order.
  std::vector<float> out(static_cast<size_t>(T * K * H), 0.0f);
  for (int64_t e = 0; e < E; ++e) {
    toks.clear();
    slots.clear();
    for (int64_t i = 0; i < T * K; ++i)
      if (chosen[static_cast<size_t>(i)] == e) {
        toks.push_back(i / K);
        slots.push_back(i);
      }
    const auto n = static_cast<int64_t>(toks.size());
    if (n == 0) continue;
    xs.resize(static_cast<size_t>(n * H));
    for (int64_t r = 0; r < n; ++r)
      std::copy_n(x.as<const float>() + toks[static_cast<size_t>(r)] * rowStride(x), H, xs.data() + r * H);
    gu.resize(static_cast<size_t>(n * 2 * I));
    const float* wgu = experts_gate_up.as<const float>() + e * 2 * I * H;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(2 * I),
                static_cast<int>(H), 1.0f, xs.data(), static_cast<int>(H), wgu, static_cast<int>(H), 0.0f, gu.data(),
                static_cast<int>(2 * I));
    a.resize(static_cast<size_t>(n * I));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < I; ++i)
        a[static_cast<size_t>(r * I + i)] =
            activate(act, gu[static_cast<size_t>(r * 2 * I + i)]) * gu[static_cast<size_t>(r * 2 * I + I + i)];
    y.resize(static_cast<size_t>(n * H));
    const float* wd = experts_down.as<const float>() + e * H * I;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(H),
                static_cast<int>(I), 1.0f, a.data(), static_cast<int>(I), wd, static_cast<int>(I), 0.0f, y.data(),
                static_cast<int>(H));
    for (int64_t r = 0; r < n; ++r) {
      const int64_t slot = slots[static_cast<size_t>(r)];
      const float w = weight[static_cast<size_t>(slot)];
      for (int64_t c = 0; c < H; ++c) out[static_cast<size_t>(slot * H + c)] = y[static_cast<size_t>(r * H + c)] * w;
    }
  }
  // 3. The weighted outputs summed per token, then added to the residual.
  for (int64_t t = 0; t < T; ++t) {
    float* res = residual.as<float>() + t * rowStride(residual);
    for (int64_t c = 0; c < H; ++c) {
      float s = 0.0f;
      for (int64_t k = 0; k < K; ++k) s += out[static_cast<size_t>((t * K + k) * H + c)];
      res[c] += s;
    }
  }
}

void CpuBackend::sigmoidGatedAdd(const TensorView& y, const TensorView& gate, TensorView residual) {
  const int64_t n = cols(residual);
  for (int64_t r = 0; r < rows(residual); ++r) {
    const float g = 1.0f / (1.0f + std::exp(-gate.as<const float>()[r * rowStride(gate)]));
    const float* yr = y.as<const float>() + r * rowStride(y);
    float* o = residual.as<float>() + r * rowStride(residual);
    for (int64_t i = 0; i < n; ++i) o[i] += g * yr[i];
  }
}

}  // namespace llmrt
