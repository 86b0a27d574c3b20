#include "model/rope.h"

#include <algorithm>
#include <cmath>

namespace llmrt {
namespace {

// 1 / base^(2i/dim) computed in float32 like torch:
//   1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
std::vector<float> defaultInvFreq(double base, int64_t dim) {
  std::vector<float> f(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float expo = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float p = static_cast<float>(std::pow(base, static_cast<double>(expo)));
    f[static_cast<size_t>(i)] = 1.0f / p;
  }
  return f;
}

double yarnGetMscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

double yarnCorrectionDim(double num_rotations, int64_t dim, double base, double max_pos) {
  return (static_cast<double>(dim) * std::log(max_pos / (num_rotations * 2.0 * M_PI))) / (2.0 * std::log(base));
}

}  // namespace

std::vector<float> alibiSlopes(int64_t n) {
  int64_t c = 1;
  while (c * 2 <= n) c *= 2;
  std::vector<float> s;
  const double base = std::pow(2.0, -8.0 / static_cast<double>(c));
  for (int64_t h = 1; h <= c; ++h) s.push_back(static_cast<float>(std::pow(base, static_cast<double>(h))));
  const double extra = std::pow(2.0, -4.0 / static_cast<double>(c));
  for (int64_t i = 0; i < std::min(c, n - c); ++i)
    s.push_back(static_cast<float>(std::pow(extra, static_cast<double>(2 * i + 1))));
  return s;
}

bool ropeDependsOnLength(const ModelConfig& c) { return c.rope_scaling.type == RopeScalingType::kDynamic; }

RopeTable computeRopeTable(const ModelConfig& c, int64_t seq_len) {
  RopeTable t;
  if (c.decoder.positions != PositionEncoding::kRotary) return t;  // nothing rotates (rotary_dim 0)
  t.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
  const int64_t dim = t.rotary_dim;
  const RopeScaling& s = c.rope_scaling;
  switch (s.type) {
    case RopeScalingType::kNone:
      t.inv_freq = defaultInvFreq(c.rope_theta, dim);
      break;
    case RopeScalingType::kLinear:
      t.inv_freq = defaultInvFreq(c.rope_theta, dim);
      for (float& f : t.inv_freq) f = f / static_cast<float>(s.factor);
      break;
    case RopeScalingType::kDynamic: {
      const int64_t max_pos =
          s.original_max_position_embeddings > 0 ? s.original_max_position_embeddings : c.max_position_embeddings;
      double base = c.rope_theta;
      if (seq_len > max_pos) {
        const double sl = static_cast<double>(seq_len);
        base = c.rope_theta * std::pow((s.factor * sl / static_cast<double>(max_pos)) - (s.factor - 1.0),
                                       static_cast<double>(dim) / static_cast<double>(dim - 2));
      }
      t.inv_freq = defaultInvFreq(base, dim);
      break;
    }
    case RopeScalingType::kLlama3: {
      t.inv_freq = defaultInvFreq(c.rope_theta, dim);
      const double old_ctx = static_cast<double>(s.original_max_position_embeddings);
      const double low_wavelen = old_ctx / s.low_freq_factor;
      const double high_wavelen = old_ctx / s.high_freq_factor;
      for (float& f : t.inv_freq) {
        const float wavelen = static_cast<float>(2.0 * M_PI) / f;
        float scaled = wavelen > static_cast<float>(low_wavelen) ? f / static_cast<float>(s.factor) : f;
        const bool medium = !(wavelen < static_cast<float>(high_wavelen)) && !(wavelen > static_cast<float>(low_wavelen));
        if (medium) {
          const float smooth = (static_cast<float>(old_ctx) / wavelen - static_cast<float>(s.low_freq_factor)) /
                               static_cast<float>(s.high_freq_factor - s.low_freq_factor);
          scaled = (1.0f - smooth) * scaled / static_cast<float>(s.factor) + smooth * scaled;
        }
        f = scaled;
      }
      break;
    }
    case RopeScalingType::kYarn: {
      const double base = c.rope_theta;
      const double orig = s.original_max_position_embeddings > 0
                              ? static_cast<double>(s.original_max_position_embeddings)
                              : static_cast<double>(c.max_position_embeddings);
      double attention = 1.0;
      if (s.attention_factor) {
        attention = *s.attention_factor;
      } else if (s.mscale && s.mscale_all_dim) {
        attention = yarnGetMscale(s.factor, *s.mscale) / yarnGetMscale(s.factor, *s.mscale_all_dim);
      } else {
        attention = yarnGetMscale(s.factor, 1.0);
      }
      double low = yarnCorrectionDim(s.beta_fast, dim, base, orig);
      double high = yarnCorrectionDim(s.beta_slow, dim, base, orig);
      if (s.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(dim - 1));
      if (low == high) high += 0.001;
      t.inv_freq.resize(static_cast<size_t>(dim / 2));
      for (int64_t i = 0; i < dim / 2; ++i) {
        const float expo = static_cast<float>(2 * i) / static_cast<float>(dim);
        const float pos_freq = static_cast<float>(std::pow(base, static_cast<double>(expo)));
        const float extrap = 1.0f / pos_freq;
        const float interp = 1.0f / (static_cast<float>(s.factor) * pos_freq);
        float ramp = (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low);
        ramp = std::clamp(ramp, 0.0f, 1.0f);
        const float extrap_factor = 1.0f - ramp;
        t.inv_freq[static_cast<size_t>(i)] = interp * (1.0f - extrap_factor) + extrap * extrap_factor;
      }
      t.attention_scaling = static_cast<float>(attention);
      break;
    }
  }
  return t;
}

}  // namespace llmrt
