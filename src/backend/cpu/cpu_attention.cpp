// CpuBackend paged attention: for each new token, softmax(q k^T * scale) v over
// the keys it may see (causal, optionally a sliding window; the scores soft-capped
// and ALiBi-biased where setAttentionExtras asked for it), read block by
// block through the sequence's block table. GQA: query head h reads kv head
// h / (num_heads / num_kv_heads). An FP8 pool's rows are read as code * scale (kvRow).
#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace llmrt {

void CpuBackend::attention(int64_t layer, const TensorView& q, int64_t num_heads, int64_t sliding_window,
                           float scale, TensorView out) {
  const std::vector<HostStep::Seq>& seqs = step_.seqs;
  const int64_t hd = geometry_.head_dim, tpb = geometry_.tokens_per_block;
  const int64_t group = num_heads / geometry_.num_kv_heads;
  const int64_t q_stride = q.strides[0], o_stride = out.strides[0];

  const float softcap = extras_.logit_softcap;
  const float* alibi = extras_.alibi_slopes.empty() ? nullptr : extras_.alibi_slopes.data();
  assert(alibi == nullptr || static_cast<int64_t>(extras_.alibi_slopes.size()) == num_heads);
  // Work items: (sequence, token, head), flattened.
  std::vector<int64_t> item_start(seqs.size() + 1, 0);
  for (size_t s = 0; s < seqs.size(); ++s) item_start[s + 1] = item_start[s] + seqs[s].q_len * num_heads;

  pool_.parallelFor(item_start.back(), [&](int64_t b, int64_t e) {
    std::vector<float> scores;
    std::vector<float> acc(static_cast<size_t>(hd)), row(static_cast<size_t>(hd));
    size_t s = static_cast<size_t>(std::upper_bound(item_start.begin(), item_start.end(), b) - item_start.begin() - 1);
    for (int64_t item = b; item < e; ++item) {
      while (item >= item_start[s + 1]) ++s;
      const HostStep::Seq& seq = seqs[s];
      const int32_t* table = step_.table(seq);
      const int64_t local = item - item_start[s];
      const int64_t t = local / num_heads, h = local % num_heads, kvh = h / group;
      const int64_t pos = seq.kv_len - seq.q_len + t;  // this token's position
      int64_t lo = sliding_window > 0 ? std::max<int64_t>(0, pos - sliding_window + 1) : 0;
      // Keys below min_key sit in released blocks (kNoKvBlock): never read. The model's
      // windows keep lo above it (HostStep::windowCovered); a wider window is a programmer
      // error, and the clamp keeps even that from reading outside the pool.
      assert(lo >= seq.min_key);
      lo = std::max(lo, seq.min_key);
      const float* qv = q.as<const float>() + (seq.q_start + t) * q_stride + h * hd;
      scores.resize(static_cast<size_t>(pos - lo + 1));
      float mx = -INFINITY;
      for (int64_t j = lo; j <= pos; ++j) {
        const uint8_t* head = kvBlockHead(primary_.data(), table[j / tpb], layer, 0, kvh);
        const float* kv = kvRow(head, j % tpb, layer, 0, row.data());
        float dot = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dot += qv[d] * kv[d];
        float sc = dot * scale;
        if (softcap > 0.0f) sc = softcap * std::tanh(sc / softcap);
        if (alibi != nullptr) sc += alibi[h] * static_cast<float>(j - pos);
        scores[static_cast<size_t>(j - lo)] = sc;
        mx = std::max(mx, sc);
      }
      float sum = 0.0f;
      for (float& sc : scores) {
        sc = std::exp(sc - mx);
        sum += sc;
      }
      const float inv = 1.0f / sum;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = lo; j <= pos; ++j) {
        const uint8_t* head = kvBlockHead(primary_.data(), table[j / tpb], layer, 1, kvh);
        const float* vv = kvRow(head, j % tpb, layer, 1, row.data());
        const float p = scores[static_cast<size_t>(j - lo)] * inv;
        for (int64_t d = 0; d < hd; ++d) acc[static_cast<size_t>(d)] += p * vv[d];
      }
      float* o = out.as<float>() + (seq.q_start + t) * o_stride + h * hd;
      std::copy(acc.begin(), acc.end(), o);
    }
  });
}

}  // namespace llmrt
