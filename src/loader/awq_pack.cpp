#include "loader/awq_pack.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"

namespace llmrt {
namespace {


struct Group {
  float scale;  // fp16-rounded
  int zero;
};

Group groupParams(const float* v, int64_t n) {
  float mx = v[0], mn = v[0];
  for (int64_t i = 1; i < n; ++i) {
    mx = std::max(mx, v[i]);
    mn = std::min(mn, v[i]);
  }
  const float scale = f16ToF32(f32ToF16(std::max(mx - mn, 1e-5f) / 15.0f));
  const int zero = std::clamp(static_cast<int>(-std::nearbyint(mn / scale)), 0, 15);
  return {scale, zero};
}

int code(float w, const Group& g) {
  return std::clamp(static_cast<int>(std::nearbyint(w / g.scale)) + g.zero, 0, 15);
}

}  // namespace

void awqRoundTrip(const float* w, int64_t out, int64_t in, int64_t group, float* deq) {
  for (int64_t r = 0; r < out; ++r)
    for (int64_t g0 = 0; g0 < in; g0 += group) {
      const float* v = w + r * in + g0;
      const Group g = groupParams(v, group);
      for (int64_t i = 0; i < group; ++i)
        deq[r * in + g0 + i] = static_cast<float>(code(v[i], g) - g.zero) * g.scale;
    }
}

AwqPacked packAwq(const float* w, int64_t out, int64_t in, int64_t group) {
  const int64_t packs = out / 8, groups = in / group;
  AwqPacked p;
  p.qweight.assign(static_cast<size_t>(in * packs), 0u);
  p.qzeros.assign(static_cast<size_t>(groups * packs), 0u);
  p.scales.assign(static_cast<size_t>(groups * out), 0);
  for (int64_t c = 0; c < out; ++c) {
    const int shift = 4 * kAwqNibble[c % 8];
    const int64_t pack = c / 8;
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* v = w + c * in + gi * group;
      const Group g = groupParams(v, group);
      p.scales[static_cast<size_t>(gi * out + c)] = f32ToF16(g.scale);
      p.qzeros[static_cast<size_t>(gi * packs + pack)] |= static_cast<uint32_t>(g.zero) << shift;
      for (int64_t i = 0; i < group; ++i)
        p.qweight[static_cast<size_t>((gi * group + i) * packs + pack)] |= static_cast<uint32_t>(code(v[i], g)) << shift;
    }
  }
  return p;
}

}  // namespace llmrt
