// Sampling on a backend (Backend::sampleRows through DeviceSamplingBatch) against
// the host Sampler, the specification. The same cases run on two backends:
//  - "reference": a test backend whose sampleRows follows the row contract on the
//    host (applies the listed penalties and masks, then samples with plain
//    params). It checks, on every machine, that DeviceSamplingBatch resolves each
//    sequence's penalties / min_tokens mask / seed stream / logprobs into rows
//    and maps results and errors back exactly as the Sampler reports them.
//  - "cuda": the CUDA kernel (skipped without the CUDA backend or a device).
// Tokens must equal the Sampler's on every row (ties, -inf, top-k / top-p / min-p
// boundaries, penalties, seeds, steps, sample indices), except a draw within 1e-6 of
// the CDF boundary between the two tokens (the host sums in float blocks); logprobs
// within 2e-5.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/philox.h"
#include "runtime/device_sampling.h"
#include "sampling/sampler.h"
#if LLMRT_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace llmrt {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A CPU backend whose sampleRows implements the row contract with the host Sampler.
class ReferenceSamplingBackend final : public Backend {
 public:
  ReferenceSamplingBackend() : cpu_(1) {}
  std::string name() const override { return "reference-sampling"; }
  Device device() const override { return Device::kCpu; }
  int numThreads() const override { return 1; }
  uint64_t freeMemoryBytes() const override { return cpu_.freeMemoryBytes(); }
  uint64_t totalMemoryBytes() const override { return cpu_.totalMemoryBytes(); }
  Result<TensorView> loadWeight(std::span<const TensorView> parts, const std::string& n, bool borrow) override {
    return cpu_.loadWeight(parts, n, borrow);
  }
  uint64_t weightBytes() const override { return cpu_.weightBytes(); }
  TensorView scratch(int slot, int64_t rows, int64_t cols, DType dtype) override {
    return cpu_.scratch(slot, rows, cols, dtype);
  }
  Status copyToHost(const TensorView& src, float* dst) override { return cpu_.copyToHost(src, dst); }
  Status copyFromHost(const float* src, TensorView dst) override { return cpu_.copyFromHost(src, dst); }
  Status allocateKvPools(const KvPoolGeometry& g, int64_t s) override { return cpu_.allocateKvPools(g, s); }
  const KvPoolGeometry& kvGeometry() const override { return cpu_.kvGeometry(); }
  Status copyKvBlocks(std::span<const KvBlockCopy> c) override { return cpu_.copyKvBlocks(c); }
  Status readKvBlock(KvPool p, int32_t b, float* d) override { return cpu_.readKvBlock(p, b, d); }
  Status setKvCacheScales(std::span<const float> s) override { return cpu_.setKvCacheScales(s); }
  Status beginStep(const StepInputs& in) override { return cpu_.beginStep(in); }
  void embedding(const TensorView& t, TensorView o) override { cpu_.embedding(t, o); }
  void rmsNorm(const TensorView& x, const TensorView& w, float e, TensorView o) override { cpu_.rmsNorm(x, w, e, o); }
  void layerNorm(const TensorView& x, const TensorView& w, const TensorView* b, float e, TensorView o) override {
    cpu_.layerNorm(x, w, b, e, o);
  }
  void activation(Activation a, const TensorView& x, TensorView o) override { cpu_.activation(a, x, o); }
  void gatedActivation(Activation a, const TensorView& x, TensorView o) override { cpu_.gatedActivation(a, x, o); }
  void addPositionEmbedding(const TensorView& t, TensorView x) override { cpu_.addPositionEmbedding(t, x); }
  void add(const TensorView& y, TensorView r) override { cpu_.add(y, r); }
  void scaleSoftcap(TensorView x, float s, float c) override { cpu_.scaleSoftcap(x, s, c); }
  Status setAttentionExtras(const AttentionExtras& e) override { return cpu_.setAttentionExtras(e); }
  void moeAdd(const TensorView& x, const TensorView& l, const TensorView& gu, const TensorView& d, const MoeRouting& r,
              Activation a, TensorView res) override {
    cpu_.moeAdd(x, l, gu, d, r, a, res);
  }
  void sigmoidGatedAdd(const TensorView& y, const TensorView& g, TensorView r) override { cpu_.sigmoidGatedAdd(y, g, r); }
  void linear(const TensorView& x, const TensorView& w, const TensorView* b, TensorView o) override {
    cpu_.linear(x, w, b, o);
  }
  void linearAdd(const TensorView& x, const TensorView& w, const TensorView* b, TensorView r) override {
    cpu_.linearAdd(x, w, b, r);
  }
  void gatherLogitRows(const TensorView& s, TensorView o) override { cpu_.gatherLogitRows(s, o); }
  void siluMul(const TensorView& g, TensorView o) override { cpu_.siluMul(g, o); }
  void ropeWriteKv(int64_t l, TensorView q, TensorView k, const TensorView& v, int64_t hd) override {
    cpu_.ropeWriteKv(l, q, k, v, hd);
  }
  void attention(int64_t l, const TensorView& q, int64_t h, int64_t w, float s, TensorView o) override {
    cpu_.attention(l, q, h, w, s, o);
  }

  bool samplesRows(std::span<const RowSampling>, int64_t) const override { return true; }
  Status sampleRows(TensorView logits, std::span<const RowSampling> rows, std::span<const PenaltyToken> penalties,
                    std::span<const int32_t> masked, std::span<RowSample> out) override {
    const int64_t vocab = logits.shape[1];
    for (size_t r = 0; r < rows.size(); ++r) {
      const RowSampling& p = rows[r];
      float* x = logits.as<float>() + static_cast<int64_t>(r) * logits.strides[0];
      for (int32_t j = 0; j < p.penalty_count; ++j) {
        const PenaltyToken& t = penalties[static_cast<size_t>(p.penalty_begin + j)];
        float& v = x[t.token];
        if (p.repetition_penalty != 1.0f && (t.in_prompt || t.generated_count > 0))
          v = v > 0.0f ? v / p.repetition_penalty : v * p.repetition_penalty;
        if ((p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) && t.generated_count > 0)
          v -= p.frequency_penalty * static_cast<float>(t.generated_count) + p.presence_penalty;
        v += t.bias;
      }
      for (int32_t j = 0; j < p.mask_count; ++j) x[masked[static_cast<size_t>(p.mask_begin + j)]] = kNegInf;
      SamplingParams q;
      q.temperature = p.greedy ? 0.0f : p.temperature;
      q.top_k = p.top_k;
      q.top_p = p.top_p;
      q.min_p = p.min_p;
      if (p.num_logprobs >= 0) q.logprobs = p.num_logprobs;
      SequenceSamplingState st(q, {}, p.seed, p.sample_index);
      for (uint64_t s = 0; s < p.step; ++s) st.accept(0);
      RowSample& o = out[r];
      o = RowSample{};
      auto res = sampler_.sample(x, vocab, q, st, {});
      if (!res.isOk()) {
        o.error = RowSample::kAllMasked;
        for (int64_t i = 0; i < vocab; ++i) {
          if (!(x[i] < std::numeric_limits<float>::infinity())) {
            o.error = RowSample::kBadValue;
            o.bad_index = static_cast<int32_t>(i);
            o.bad_value = x[i];
            break;
          }
        }
        continue;
      }
      o.token = res->token;
      o.logprob = res->logprob;
      o.rank = res->rank;
      o.num_top = res->num_top;
      for (int j = 0; j < res->num_top; ++j) {
        o.top_ids[j] = res->top[static_cast<size_t>(j)].token;
        o.top_logprobs[j] = res->top[static_cast<size_t>(j)].logprob;
      }
    }
    return Status::ok();
  }

 private:
  CpuBackend cpu_;
  Sampler sampler_;
};

// One row to sample: its logits and the sequence's controls.
struct Case {
  std::vector<float> logits;
  SamplingParams params;
  SequenceSamplingState state;
};

std::vector<float> randomLogits(int64_t vocab, float sigma, std::mt19937& rng, float quantum = 0.0f) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(vocab));
  for (float& x : v) {
    x = d(rng);
    if (quantum > 0.0f) x = std::round(x / quantum) * quantum;  // many exact ties
  }
  return v;
}

// A row of a few-row step: its controls with `seed` and 100 max tokens, a sampling state over
// `prompt` that has accepted `generated` tokens (0, 1, ...).
Case fewRowCase(std::vector<float> logits, SamplingParams p, uint64_t seed, const std::vector<int32_t>& prompt,
                int generated) {
  p.seed = seed;
  p.max_tokens = 100;
  Case c{std::move(logits), p, SequenceSamplingState(p, prompt, seed, 0)};
  for (int i = 0; i < generated; ++i) c.state.accept(i);
  return c;
}

// The sampling configurations every backend must reproduce exactly.
std::vector<SamplingParams> configs() {
  std::vector<SamplingParams> out;
  auto add = [&](float t, int k, float p, float min_p) {
    SamplingParams s;
    s.temperature = t;
    s.top_k = k;
    s.top_p = p;
    s.min_p = min_p;
    out.push_back(s);
  };
  add(0.0f, 0, 1.0f, 0.0f);  // greedy
  add(1.0f, 0, 1.0f, 0.0f);
  add(0.7f, 0, 1.0f, 0.0f);
  add(1.3f, 0, 1.0f, 0.0f);
  add(1.0f, 1, 1.0f, 0.0f);
  add(1.0f, 5, 1.0f, 0.0f);
  add(0.8f, 50, 1.0f, 0.0f);
  add(1.0f, 300, 1.0f, 0.0f);
  add(1.0f, 5000, 1.0f, 0.0f);
  add(1.0f, 0, 0.9f, 0.0f);
  add(0.6f, 0, 0.5f, 0.0f);
  add(1.0f, 0, 0.99f, 0.0f);
  add(1.0f, 0, 1.0f, 0.05f);
  add(1.5f, 0, 1.0f, 0.3f);
  add(0.9f, 40, 0.95f, 0.02f);
  add(1.0f, 2000, 0.8f, 0.0f);
  return out;
}

class DeviceSampling : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "reference") {
      backend_ = std::make_unique<ReferenceSamplingBackend>();
      return;
    }
#if !LLMRT_HAVE_CUDA
    GTEST_SKIP() << "this build has no CUDA backend (LLMRT_CUDA=OFF)";
#else
    if (cudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device found";
    CudaBackendOptions o;
    o.weight_dtype = DType::kF32;
    o.kv_dtype = DType::kF32;
    // "cuda_no_rowgroup": the one-CTA-per-row kernel (and the host) where the row-group kernel
    // would take few rows.
    o.tuning.row_group_sampling = GetParam() != "cuda_no_rowgroup";
    auto r = createCudaBackend(o);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    backend_ = std::move(*r);
#endif
  }

  // Samples the cases on the backend (one step) and with the host Sampler; every token
  // (or error) must agree, and logprobs closely.
  void expectSameAsSampler(const std::vector<Case>& cases, std::span<const int32_t> eos, const std::string& what) {
    ASSERT_FALSE(cases.empty());
    const int64_t vocab = static_cast<int64_t>(cases[0].logits.size());
    const int64_t rows = static_cast<int64_t>(cases.size());
    std::vector<float> all;
    all.reserve(static_cast<size_t>(rows * vocab));
    DeviceSamplingBatch batch;
    for (const Case& c : cases) {
      all.insert(all.end(), c.logits.begin(), c.logits.end());
      batch.add(c.params, c.state, eos);
    }
    TensorView logits = backend_->scratch(0, rows, vocab, DType::kF32);
    ASSERT_TRUE(backend_->copyFromHost(all.data(), logits).isOk());
    Status s = batch.run(*backend_, logits);
    ASSERT_TRUE(s.isOk()) << what << ": " << s.toString();
    Sampler sampler;
    int mismatches = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      auto want = sampler.sample(c.logits.data(), vocab, c.params, c.state, eos);
      auto got = batch.result(i, vocab);
      ASSERT_EQ(want.isOk(), got.isOk()) << what << " row " << i << ": host " << want.status().toString()
                                         << ", backend " << got.status().toString();
      if (!want.isOk()) {
        EXPECT_EQ(want.status().toString(), got.status().toString()) << what << " row " << i;
        continue;
      }
      if (want->token != got->token) {
        // The host sums probabilities in float blocks (src/sampling/kernels.cpp), so its CDF is
        // off by ~1e-7 of the total: a draw that lands that close to the boundary between the
        // two tokens may go either way. Anything else is a failure.
        const double gap = boundaryDistance(c, vocab, eos, want->token, got->token);
        if (gap < 1e-6) {
          ++boundary_cases_;
          std::printf("%s row %zu: host %d, backend %d: u lies %.2e from their CDF boundary\n", what.c_str(), i,
                      want->token, got->token, gap);
          continue;
        }
        ++mismatches;
        ADD_FAILURE() << what << " row " << i << ": host token " << want->token << ", backend " << got->token
                      << " (t=" << c.params.temperature << " k=" << c.params.top_k << " p=" << c.params.top_p
                      << " min_p=" << c.params.min_p << ")";
        continue;
      }
      if (!c.params.logprobs) continue;
      EXPECT_NEAR(want->logprob, got->logprob, 2e-5) << what << " row " << i;
      EXPECT_EQ(want->rank, got->rank) << what << " row " << i;
      ASSERT_EQ(want->num_top, got->num_top) << what << " row " << i;
      for (int j = 0; j < want->num_top; ++j) {
        EXPECT_EQ(want->top[static_cast<size_t>(j)].token, got->top[static_cast<size_t>(j)].token)
            << what << " row " << i << " top " << j;
        const float w = want->top[static_cast<size_t>(j)].logprob, g = got->top[static_cast<size_t>(j)].logprob;
        if (std::isinf(w)) {
          EXPECT_EQ(w, g) << what << " row " << i << " top " << j;  // a masked token: -inf on both
        } else {
          EXPECT_NEAR(w, g, 2e-5) << what << " row " << i << " top " << j;
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << what;
  }

  // How far the row's uniform lies from the CDF boundary between tokens a and b (both
  // kept) in the host's kept distribution, computed in double in id order; 1 when either
  // token is not kept or a token lies between them.
  static double boundaryDistance(const Case& c, int64_t vocab, std::span<const int32_t> eos, int32_t a, int32_t b) {
    Sampler sampler;
    auto dist = sampler.distribution(c.logits.data(), vocab, c.params, c.state, eos);
    if (!dist.isOk()) return 1.0;
    const int32_t lo = std::min(a, b), hi = std::max(a, b);
    double cdf = 0.0;
    bool seen_lo = false;
    for (const TokenProb& t : *dist) {
      if (t.token > lo && t.token < hi && t.prob > 0.0) return 1.0;  // not neighbours
      cdf += t.prob;
      if (t.token == lo) {
        seen_lo = true;
        break;
      }
    }
    if (!seen_lo) return 1.0;
    const double u = philoxUniform(c.state.seed(), static_cast<uint64_t>(c.state.numGenerated()), c.state.sampleIndex());
    return std::abs(u - cdf);
  }

  void TearDown() override {
    // Boundary cases are rare (about one draw in 2,000 at a 128k vocabulary); many would mean a bias.
    EXPECT_LE(boundary_cases_, 3) << "draws at a CDF boundary";
  }

  std::unique_ptr<Backend> backend_;
  int boundary_cases_ = 0;
};

TEST_P(DeviceSampling, EveryConfigurationMatchesTheHostSampler) {
  std::mt19937 rng(7);
  for (int64_t vocab : {1000, 32000, 128256}) {
    for (float sigma : {1.0f, 3.0f, 8.0f}) {
      std::vector<Case> cases;
      uint64_t seed = 1000;
      for (const SamplingParams& base : configs()) {
        for (int rep = 0; rep < 3; ++rep) {
          Case c;
          c.logits = randomLogits(vocab, sigma, rng, rep == 2 ? 0.25f : 0.0f);
          c.params = base;
          c.params.seed = seed++;
          c.state = SequenceSamplingState(c.params, {}, *c.params.seed, static_cast<uint32_t>(rep));
          for (int s = 0; s < rep * 5; ++s) c.state.accept(0);  // later steps draw other uniforms
          cases.push_back(std::move(c));
        }
      }
      expectSameAsSampler(cases, {}, "vocab " + std::to_string(vocab) + " sigma " + std::to_string(sigma));
    }
  }
}

TEST_P(DeviceSampling, ManySeedsOnOneRow) {
  // One distribution, 512 draws (seeds): exact agreement exercises the inverse CDF everywhere.
  std::mt19937 rng(11);
  const std::vector<float> logits = randomLogits(32000, 2.0f, rng);
  for (const SamplingParams& base : {configs()[1], configs()[9], configs()[14]}) {
    std::vector<Case> cases;
    for (uint64_t seed = 0; seed < 512; ++seed) {
      Case c{logits, base, {}};
      c.params.seed = seed;
      c.state = SequenceSamplingState(c.params, {}, seed, 0);
      cases.push_back(std::move(c));
    }
    expectSameAsSampler(cases, {}, "512 seeds");
  }
}

TEST_P(DeviceSampling, PenaltiesMinTokensAndLogprobs) {
  std::mt19937 rng(3);
  const int64_t vocab = 5000;
  const std::vector<int32_t> eos = {2, 7};
  std::uniform_int_distribution<int32_t> tok(0, 60);  // a small range, so tokens repeat
  std::vector<Case> cases;
  uint64_t seed = 77;
  for (const SamplingParams& base : configs()) {
    for (int variant = 0; variant < 4; ++variant) {
      Case c;
      c.logits = randomLogits(vocab, 2.0f, rng);
      for (int i = 0; i < 60; ++i) c.logits[static_cast<size_t>(i)] += 4.0f;  // the repeated tokens are likely
      c.params = base;
      c.params.seed = seed++;
      c.params.max_tokens = 100;
      if (variant == 0 || variant == 3) c.params.repetition_penalty = 1.3f;
      if (variant == 1 || variant == 3) {
        c.params.frequency_penalty = 0.5f;
        c.params.presence_penalty = -0.3f;
      }
      if (variant == 2) {
        c.params.min_tokens = 50;  // EOS ids and stop ids masked
        c.params.stop_token_ids = {11, 12};
      }
      // logit_bias: alone (variant 2) and on tokens the penalties also touch (variant 3).
      if (variant == 2 || variant == 3) c.params.logit_bias = {{3, 2.5f}, {25, -4.0f}, {100, 1.5f}, {11, 30.0f}};
      c.params.logprobs = variant == 0 ? 0 : (variant == 1 ? 5 : 20);
      std::vector<int32_t> prompt;
      for (int i = 0; i < 30; ++i) prompt.push_back(tok(rng));
      c.state = SequenceSamplingState(c.params, prompt, *c.params.seed, 0);
      for (int i = 0; i < 20; ++i) c.state.accept(tok(rng));
      cases.push_back(std::move(c));
    }
  }
  expectSameAsSampler(cases, eos, "penalties");
}

// A few rows with a small top-k (the CUDA backend's compact pass: many CTAs per row keep their
// slice's top-k; LLMRT_CUDA_DISABLE=compact: the row-group kernel) sample what the host Sampler
// samples: quantized logits (ties across slices), penalties and min_tokens masks, a NaN row next
// to good ones, and top-k of 1 and 256.
TEST_P(DeviceSampling, FewRowsWithASmallTopK) {
  std::mt19937 rng(31);
  const std::vector<int32_t> eos = {2, 7};
  uint64_t seed = 500;
  for (int64_t vocab : {1000, 32000, 128256}) {
    for (int k : {1, 5, 40, 256}) {
      for (int rows : {1, 2, 3, 4, 6}) {
        std::vector<Case> cases;
        for (int r = 0; r < rows; ++r) {
          SamplingParams p;
          p.temperature = 0.9f;
          p.top_k = k;
          p.top_p = r % 2 ? 0.9f : 1.0f;
          p.min_p = r == 3 ? 0.05f : 0.0f;
          std::vector<int32_t> prompt;
          if (r == 1) {
            p.repetition_penalty = 1.3f;
            for (int i = 0; i < 30; ++i) prompt.push_back(i * 7);
          }
          if (r == 3) p.min_tokens = 10;  // EOS masked
          cases.push_back(fewRowCase(randomLogits(vocab, r == 1 ? 8.0f : 2.0f, rng, r == 2 ? 0.25f : 0.0f), p,
                                     seed++, prompt, r * 3));
        }
        expectSameAsSampler(cases, eos, "vocab " + std::to_string(vocab) + " k " + std::to_string(k) + " rows " +
                                            std::to_string(rows));
      }
    }
  }
  std::vector<Case> bad;
  for (int r = 0; r < 3; ++r) {
    Case c;
    c.logits = randomLogits(32000, 2.0f, rng);
    c.params.temperature = 1.0f;
    c.params.top_k = 20;
    c.params.seed = 9;
    c.state = SequenceSamplingState(c.params, {}, 9, 0);
    bad.push_back(std::move(c));
  }
  bad[1].logits[20000] = std::numeric_limits<float>::quiet_NaN();
  expectSameAsSampler(bad, {}, "a NaN row among few");
}

// A few rows with top-p and no top-k (CUDA: the row-group kernel, many CTAs per row, each over a
// slice of the vocabulary). Peaked rows (small nucleus), flat rows (a nucleus of thousands),
// quantized logits (ties at the cut), p up to 0.99, penalties, masks, min-p and a top-k of the
// whole vocabulary (off) all sample the host's token.
TEST_P(DeviceSampling, FewRowsWithTopPAlone) {
  std::mt19937 rng(47);
  const std::vector<int32_t> eos = {2, 7};
  uint64_t seed = 900;
  for (int64_t vocab : {1000, 32000, 128256}) {
    for (float top_p : {0.5f, 0.9f, 0.95f, 0.99f}) {
      for (float scale : {12.0f, 4.0f, 0.5f}) {
        for (int rows : {1, 3, 6}) {
          std::vector<Case> cases;
          for (int r = 0; r < rows; ++r) {
            SamplingParams p;
            p.temperature = r == 1 ? 0.7f : 1.0f;
            p.top_p = top_p;
            p.top_k = r == 2 ? static_cast<int32_t>(vocab) : 0;
            p.min_p = r == 1 ? 0.02f : 0.0f;
            p.presence_penalty = r == 1 ? 0.5f : 0.0f;  // over the generated tokens
            if (r == 2) p.min_tokens = 10;             // EOS masked
            cases.push_back(fewRowCase(randomLogits(vocab, scale, rng, r == 2 ? 0.25f : 0.0f), p, seed++, {}, r * 2));
          }
          expectSameAsSampler(cases, eos, "vocab " + std::to_string(vocab) + " p " + std::to_string(top_p) +
                                              " scale " + std::to_string(scale) + " rows " + std::to_string(rows));
        }
      }
    }
  }
}

// Steps of one to four and of sixteen rows (CUDA: the row-group kernel, whose CTAs exchange maxima, masses,
// radix histograms, tie counts and draw sums between grid-wide barriers) in every configuration,
// mixed in a step: greedy, plain temperature, top-k up to 5000, top-p with and without top-k,
// min-p, with logprobs (0, 5, 20), penalties, min_tokens masks and quantized logits (ties across
// slices), on flat and peaked rows.
TEST_P(DeviceSampling, FewRowsOfEveryConfiguration) {
  std::mt19937 rng(53);
  const std::vector<int32_t> eos = {2, 7};
  const std::vector<SamplingParams> all = configs();
  uint64_t seed = 3000;
  for (int64_t vocab : {1000, 32000, 128256}) {
    for (float sigma : {1.0f, 8.0f}) {
      size_t next = 0;
      for (int rows = 1; next < all.size(); rows = rows % 4 + 1) {
        std::vector<Case> cases;
        for (int r = 0; r < rows && next < all.size(); ++r, ++next) {
          SamplingParams p = all[next];
          if (next % 3 != 2) p.logprobs = next % 3 == 0 ? 20 : static_cast<int32_t>(next % 6);
          std::vector<int32_t> prompt;
          if (next % 4 == 1) {
            p.repetition_penalty = 1.3f;
            p.frequency_penalty = 0.2f;
            for (int i = 0; i < 30; ++i) prompt.push_back(i * 5);
          }
          if (next % 5 == 2) p.min_tokens = 10;  // EOS masked
          cases.push_back(fewRowCase(randomLogits(vocab, sigma, rng, next % 3 == 1 ? 0.25f : 0.0f), p, seed++,
                                     prompt, static_cast<int>(next % 4) * 2));
        }
        expectSameAsSampler(cases, eos, "vocab " + std::to_string(vocab) + " sigma " + std::to_string(sigma) +
                                            " rows " + std::to_string(rows) + " from config " +
                                            std::to_string(next - cases.size()));
      }
      // All sixteen configurations in one step (fewer CTAs per row), one row with a NaN, one
      // with every token masked but one.
      std::vector<Case> step;
      for (size_t i = 0; i < all.size(); ++i) {
        SamplingParams p = all[i];
        if (i % 2) p.logprobs = 3;
        step.push_back(fewRowCase(randomLogits(vocab, sigma, rng), p, seed++, {}, static_cast<int>(i)));
      }
      step[5].logits[static_cast<size_t>(vocab / 2)] = std::numeric_limits<float>::quiet_NaN();
      for (int64_t i = 0; i < vocab; ++i)
        if (i != vocab - 1) step[9].logits[static_cast<size_t>(i)] = kNegInf;
      expectSameAsSampler(step, eos, "vocab " + std::to_string(vocab) + " sigma " + std::to_string(sigma) +
                                         " all configurations in one step");
    }
  }
}

TEST_P(DeviceSampling, BadRowsReportTheSamplersErrors) {
  std::mt19937 rng(5);
  const int64_t vocab = 3000;
  std::vector<Case> cases;
  for (int i = 0; i < 4; ++i) {
    Case c;
    c.logits = randomLogits(vocab, 1.0f, rng);
    c.params.temperature = i % 2 ? 1.0f : 0.0f;
    c.params.seed = 1;
    c.params.max_tokens = 10;
    c.state = SequenceSamplingState(c.params, {}, 1, 0);
    cases.push_back(std::move(c));
  }
  cases[0].logits[1234] = std::numeric_limits<float>::quiet_NaN();
  cases[1].logits[17] = std::numeric_limits<float>::infinity();
  cases[1].logits[2999] = std::numeric_limits<float>::quiet_NaN();
  // Row 2: only the EOS ids are finite, and min_tokens masks them: nothing is left.
  std::fill(cases[2].logits.begin(), cases[2].logits.end(), kNegInf);
  cases[2].logits[2] = 1.0f;
  cases[2].params.min_tokens = 5;
  cases[2].state = SequenceSamplingState(cases[2].params, {}, 1, 0);
  // Row 3 is fine: a bad row does not disturb its neighbours.
  const std::vector<int32_t> eos = {2};
  expectSameAsSampler(cases, eos, "bad rows");
}

// Overlapped steps: two sampleRowsAsync calls in flight, collected in order, give what the
// synchronous call gives; a result three calls old is refused.
TEST_P(DeviceSampling, AsyncResultsEqualTheSynchronousOnes) {
  if (GetParam() == "reference") GTEST_SKIP() << "the async calls are for device backends";
  std::mt19937 rng(23);
  const int64_t vocab = 32000, rows = 6;
  auto makeBatch = [&](uint64_t seed0, std::vector<float>& all) {
    DeviceSamplingBatch b;
    all.clear();
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> l = randomLogits(vocab, 2.0f, rng);
      all.insert(all.end(), l.begin(), l.end());
      SamplingParams p = configs()[static_cast<size_t>(r) % configs().size()];
      p.logprobs = 2;
      b.add(p, SequenceSamplingState(p, {}, seed0 + static_cast<uint64_t>(r), 0), {});
    }
    return b;
  };
  std::vector<float> la, lb;
  DeviceSamplingBatch a = makeBatch(100, la), b = makeBatch(200, lb);
  TensorView va = backend_->scratch(0, rows, vocab, DType::kF32), vb = backend_->scratch(1, rows, vocab, DType::kF32);
  ASSERT_TRUE(backend_->copyFromHost(la.data(), va).isOk());
  ASSERT_TRUE(backend_->copyFromHost(lb.data(), vb).isOk());
  auto ta = a.start(*backend_, va);
  auto tb = b.start(*backend_, vb);
  ASSERT_TRUE(ta.isOk() && tb.isOk()) << ta.status().toString() << " " << tb.status().toString();
  ASSERT_TRUE(a.wait(*backend_, *ta).isOk());
  ASSERT_TRUE(b.wait(*backend_, *tb).isOk());
  DeviceSamplingBatch a2 = a, b2 = b;
  ASSERT_TRUE(backend_->copyFromHost(la.data(), va).isOk());
  ASSERT_TRUE(a2.run(*backend_, va).isOk());
  ASSERT_TRUE(backend_->copyFromHost(lb.data(), vb).isOk());
  ASSERT_TRUE(b2.run(*backend_, vb).isOk());
  for (int64_t r = 0; r < rows; ++r) {
    auto x = a.result(static_cast<size_t>(r), vocab), y = a2.result(static_cast<size_t>(r), vocab);
    auto u = b.result(static_cast<size_t>(r), vocab), v = b2.result(static_cast<size_t>(r), vocab);
    ASSERT_TRUE(x.isOk() && y.isOk() && u.isOk() && v.isOk());
    EXPECT_EQ(x->token, y->token) << "row " << r;
    EXPECT_EQ(x->logprob, y->logprob) << "row " << r;
    EXPECT_EQ(u->token, v->token) << "row " << r;
    EXPECT_EQ(u->top[1].token, v->top[1].token) << "row " << r;
  }
  std::vector<RowSample> out(static_cast<size_t>(rows));
  EXPECT_EQ(backend_->waitSamples(*ta, out).code(), StatusCode::kInvalidArgument);  // overwritten since
}

// Overlapped steps with penalties: a row whose newest token is still on the device (the previous
// result's row pending_src) samples exactly as the same row whose state has that token recorded:
// a token already in the list (prompt or output) has its count raised, a new one is penalized on
// its own; rows without penalties ignore it.
TEST_P(DeviceSampling, PendingTokensCountAsGenerated) {
  if (GetParam() == "reference") GTEST_SKIP() << "pending tokens come from a device result";
  std::mt19937 rng(31);
  const int64_t vocab = 4000;
  // The previous step: greedy rows whose argmax is tokens[r].
  const std::vector<int32_t> tokens = {17, 250, 999, 3001, 42, 7, 1234};
  const int64_t rows = static_cast<int64_t>(tokens.size());
  std::vector<float> prev(static_cast<size_t>(rows * vocab), 0.0f);
  DeviceSamplingBatch first;
  for (int64_t r = 0; r < rows; ++r) {
    prev[static_cast<size_t>(r * vocab + tokens[static_cast<size_t>(r)])] = 5.0f;
    SamplingParams g;
    g.temperature = 0.0f;
    first.add(g, SequenceSamplingState(g, {}, 1, 0), {});
  }
  // This step: each row's pending token holds the top logit, so the penalties decide.
  std::vector<float> cur;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> l = randomLogits(vocab, 2.0f, rng);
    l[static_cast<size_t>(tokens[static_cast<size_t>(r)])] = *std::max_element(l.begin(), l.end()) + 0.5f;
    cur.insert(cur.end(), l.begin(), l.end());
  }
  struct Row {
    SamplingParams p;
    std::vector<int32_t> prompt;
    std::vector<int32_t> generated;  // before the pending token
  };
  std::vector<Row> spec(static_cast<size_t>(rows));
  for (Row& x : spec) x.p.temperature = 0.0f;  // greedy unless set below
  spec[0].p.repetition_penalty = 1.5f;  // pending token in the prompt: penalized once, not twice
  spec[0].prompt = {17, 5, 6};
  spec[1].p.repetition_penalty = 1.5f;  // pending token new
  spec[1].prompt = {5, 6};
  spec[1].generated = {8};
  spec[2].p.frequency_penalty = 0.6f;  // generated twice before: its count becomes 3
  spec[2].p.presence_penalty = 0.3f;
  spec[2].generated = {999, 12, 999};
  spec[3].p.frequency_penalty = 0.6f;  // the first generated token (the list is empty)
  spec[3].p.presence_penalty = 0.3f;
  spec[4].p.temperature = 0.9f;  // sampled, every penalty
  spec[4].p.top_k = 30;
  spec[4].p.repetition_penalty = 1.2f;
  spec[4].p.frequency_penalty = 0.2f;
  spec[4].p.presence_penalty = 0.1f;
  spec[4].prompt = {1, 2, 3};
  spec[4].generated = {42, 9};
  spec[5].p.temperature = 0.8f;  // top-p alone, output penalties
  spec[5].p.top_p = 0.9f;
  spec[5].p.presence_penalty = 1.0f;
  spec[5].generated = {3};
  spec[6].generated = {1234};  // no penalties: the pending token changes nothing
  // Adds row x to `with_pending` with its newest token pending (in the previous result's row r)
  // and to `with_known` with that token recorded.
  auto addBoth = [&](const Row& x, int64_t r, DeviceSamplingBatch& with_pending, DeviceSamplingBatch& with_known) {
    SequenceSamplingState pending(x.p, x.prompt, *x.p.seed, 0);
    for (int32_t t : x.generated) pending.accept(t);
    SequenceSamplingState known = pending;
    pending.acceptPending();
    known.accept(tokens[static_cast<size_t>(r)]);
    with_pending.add(x.p, pending, {}, static_cast<int32_t>(r));
    with_known.add(x.p, known, {});
  };
  DeviceSamplingBatch got, want;
  for (int64_t r = 0; r < rows; ++r) {
    Row& x = spec[static_cast<size_t>(r)];
    x.p.seed = 100 + static_cast<uint64_t>(r);
    x.p.logprobs = 3;
    addBoth(x, r, got, want);
  }
  EXPECT_EQ(got.rows()[6].pending_src, -1);  // (add drops it where no penalty reads it)
  TensorView vp = backend_->scratch(0, rows, vocab, DType::kF32), vc = backend_->scratch(1, rows, vocab, DType::kF32);
  ASSERT_TRUE(backend_->copyFromHost(prev.data(), vp).isOk());
  ASSERT_TRUE(backend_->copyFromHost(cur.data(), vc).isOk());
  auto t1 = first.start(*backend_, vp);
  ASSERT_TRUE(t1.isOk()) << t1.status().toString();
  auto t2 = got.start(*backend_, vc);
  ASSERT_TRUE(t2.isOk()) << t2.status().toString();
  ASSERT_TRUE(first.wait(*backend_, *t1).isOk());
  ASSERT_TRUE(got.wait(*backend_, *t2).isOk());
  for (int64_t r = 0; r < rows; ++r) {
    auto f = first.result(static_cast<size_t>(r), vocab);
    ASSERT_TRUE(f.isOk());
    ASSERT_EQ(f->token, tokens[static_cast<size_t>(r)]);
  }
  ASSERT_TRUE(backend_->copyFromHost(cur.data(), vc).isOk());
  ASSERT_TRUE(want.run(*backend_, vc).isOk());
  for (int64_t r = 0; r < rows; ++r) {
    auto g = got.result(static_cast<size_t>(r), vocab), w = want.result(static_cast<size_t>(r), vocab);
    ASSERT_TRUE(g.isOk() && w.isOk()) << "row " << r;
    EXPECT_EQ(g->token, w->token) << "row " << r;
    EXPECT_EQ(g->logprob, w->logprob) << "row " << r;
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(g->top[static_cast<size_t>(j)].token, w->top[static_cast<size_t>(j)].token) << "row " << r;
      EXPECT_EQ(g->top[static_cast<size_t>(j)].logprob, w->top[static_cast<size_t>(j)].logprob) << "row " << r;
    }
    // The penalized greedy rows no longer pick the pending token, which held the top logit.
    if (r < 4) EXPECT_NE(g->token, tokens[static_cast<size_t>(r)]) << "row " << r;
  }
  EXPECT_EQ(got.result(6, vocab)->token, tokens[6]);
  // The same on the compact pass (CUDA: at most a few rows, each sampled with a small top-k and
  // no logprobs), whose first kernel applies the penalties: rows 2-5 with top-k 40, seeded draws.
  DeviceSamplingBatch got_c, want_c;
  for (int64_t r = 2; r < 6; ++r) {
    Row x = spec[static_cast<size_t>(r)];
    x.p.temperature = 0.7f;
    x.p.top_k = 40;
    x.p.top_p = 1.0f;
    x.p.logprobs.reset();
    addBoth(x, r, got_c, want_c);
  }
  TensorView vc4 = backend_->scratch(1, 4, vocab, DType::kF32);
  auto t3 = first.start(*backend_, vp);  // the previous step again: the latest result
  ASSERT_TRUE(t3.isOk()) << t3.status().toString();
  ASSERT_TRUE(backend_->copyFromHost(cur.data() + 2 * vocab, vc4).isOk());
  ASSERT_TRUE(got_c.run(*backend_, vc4).isOk());
  ASSERT_TRUE(first.wait(*backend_, *t3).isOk());
  ASSERT_TRUE(backend_->copyFromHost(cur.data() + 2 * vocab, vc4).isOk());
  ASSERT_TRUE(want_c.run(*backend_, vc4).isOk());
  for (size_t r = 0; r < 4; ++r) {
    auto g = got_c.result(r, vocab), w = want_c.result(r, vocab);
    ASSERT_TRUE(g.isOk() && w.isOk()) << "compact row " << r;
    EXPECT_EQ(g->token, w->token) << "compact row " << r;
  }
  // A pending row with no earlier result in range is refused.
  DeviceSamplingBatch bad;
  SamplingParams rp;
  rp.repetition_penalty = 1.1f;
  const std::vector<int32_t> one_token = {1};
  SequenceSamplingState st(rp, one_token, 1, 0);
  st.acceptPending();
  bad.add(rp, st, {}, static_cast<int32_t>(rows + 5));
  TensorView one = backend_->scratch(2, 1, vocab, DType::kF32);
  ASSERT_TRUE(backend_->copyFromHost(cur.data(), one).isOk());
  EXPECT_EQ(bad.run(*backend_, one).code(), StatusCode::kInvalidArgument);
}

TEST_P(DeviceSampling, TimingOfOneStep) {
  // Informational: the cost of sampleRows for one decode step at Llama-3's vocabulary.
  if (GetParam() == "reference") GTEST_SKIP() << "timing is for device backends";
  std::mt19937 rng(9);
  const int64_t vocab = 128256;
  // Microseconds per sampleRows call over `rows` rows of logits of spread `sigma` sampled with `base`.
  auto time = [&](int rows, float sigma, const SamplingParams& base) {
    std::vector<float> all;
    DeviceSamplingBatch batch;
    for (int r = 0; r < rows; ++r) {
      std::vector<float> l = randomLogits(vocab, sigma, rng);
      all.insert(all.end(), l.begin(), l.end());
      SamplingParams p = base;
      p.seed = static_cast<uint64_t>(r);
      batch.add(p, SequenceSamplingState(p, {}, *p.seed, 0), {});
    }
    TensorView logits = backend_->scratch(0, rows, vocab, DType::kF32);
    EXPECT_TRUE(backend_->copyFromHost(all.data(), logits).isOk());
    EXPECT_TRUE(batch.run(*backend_, logits).isOk());  // warm-up
    const int reps = 20;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) EXPECT_TRUE(batch.run(*backend_, logits).isOk());
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
  };
  for (int rows : {1, 16, 64, 256}) {
    for (const SamplingParams& base : {configs()[0], configs()[1], configs()[14]}) {
      const double us = time(rows, 2.0f, base);
      std::printf("sampleRows vocab %lld, %d rows, t=%.1f k=%d p=%.2f min_p=%.2f: %.1f us per step\n",
                  static_cast<long long>(vocab), rows, static_cast<double>(base.temperature), base.top_k,
                  static_cast<double>(base.top_p), static_cast<double>(base.min_p), us);
    }
  }
  // Top-p alone on a few rows (CUDA: the row-group kernel; logits of spread 8: a nucleus of a few
  // tokens, spread 2: thousands).
  SamplingParams top_p;
  top_p.temperature = 0.9f;
  top_p.top_p = 0.95f;
  for (int rows : {1, 4, 16})
    for (float sigma : {8.0f, 2.0f})
      std::printf("sampleRows vocab %lld, %d rows, t=0.9 top-p 0.95 alone, logit spread %.0f: %.1f us per step\n",
                  static_cast<long long>(vocab), rows, static_cast<double>(sigma), time(rows, sigma, top_p));
  // A few rows in other configurations (CUDA: the row-group kernel).
  SamplingParams with_logprobs = configs()[14];
  with_logprobs.logprobs = 5;
  for (int rows : {1, 4, 16}) {
    for (const SamplingParams& base : {configs()[1], configs()[7], configs()[8], configs()[11], with_logprobs}) {
      std::printf("sampleRows vocab %lld, %d rows, t=%.1f k=%d p=%.2f min_p=%.2f logprobs %d: %.1f us per step\n",
                  static_cast<long long>(vocab), rows, static_cast<double>(base.temperature), base.top_k,
                  static_cast<double>(base.top_p), static_cast<double>(base.min_p), base.logprobs.value_or(-1),
                  time(rows, 2.0f, base));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceSampling, ::testing::Values("reference", "cuda", "cuda_no_rowgroup"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace llmrt
