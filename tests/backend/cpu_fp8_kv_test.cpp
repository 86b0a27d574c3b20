// The CPU reference's FP8 KV cache (KvPoolGeometry::dtype F8_E4M3): rows stored as E4M3 codes of
// x / scale (saturating), a K and a V scale per layer; attention over such a pool is, to the bit,
// attention over a float32 pool holding code * scale; copies move the codes; bad scales are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/fp8.h"
#include "op_test_util.h"

namespace llmrt {
namespace {

constexpr int64_t kLayers = 2, kKvHeads = 2, kHeadDim = 8, kTpb = 4, kBlocks = 6;
const std::vector<float> kScales = {0.5f, 0.25f, 2.0f, 0.125f};  // [layer][K, V]

// One sequence of `n` rows written to slots 0..n-1 (positions 0..n-1, no rotation).
struct Step {
  std::vector<int32_t> ids, pos, table;
  std::vector<int64_t> slots;
  StepSeq seq;
  StepInputs in;
  explicit Step(int64_t n)
      : ids(static_cast<size_t>(n), 0), pos(static_cast<size_t>(n)), slots(static_cast<size_t>(n)) {
    std::iota(pos.begin(), pos.end(), 0);
    std::iota(slots.begin(), slots.end(), 0);
    table.resize(static_cast<size_t>((n + kTpb - 1) / kTpb));
    std::iota(table.begin(), table.end(), 0);
    seq = StepSeq{0, n, n, table, 0};
    in.token_ids = ids;
    in.positions = pos;
    in.slots = slots;
    in.seqs = std::span<const StepSeq>(&seq, 1);
  }
};

// Writes k and v ([n, kv_heads * head_dim] each) of every layer (the same rows, layer l's times l + 1).
void writeRows(CpuBackend& b, int64_t n, const std::vector<float>& k, const std::vector<float>& v) {
  const int64_t kv = kKvHeads * kHeadDim;
  for (int64_t layer = 0; layer < kLayers; ++layer) {
    std::vector<float> kk = k, vv = v;
    for (float& x : kk) x *= static_cast<float>(layer + 1);
    for (float& x : vv) x *= static_cast<float>(layer + 1);
    TensorView kt(kk.data(), DType::kF32, Shape{n, kv}), vt(vv.data(), DType::kF32, Shape{n, kv});
    b.ropeWriteKv(layer, TensorView(kk.data(), DType::kF32, Shape{n, 0}), kt, vt, kHeadDim);
  }
}

std::vector<float> block(CpuBackend& b, KvPool pool, int32_t blk) {
  std::vector<float> out(static_cast<size_t>(kLayers * 2 * kKvHeads * kTpb * kHeadDim));
  EXPECT_TRUE(b.readKvBlock(pool, blk, out.data()).isOk());
  return out;
}

TEST(CpuFp8Kv, RowsAreTheCodesOfValueOverScale) {
  CpuBackend b(1);
  ASSERT_TRUE(b.setKvCacheScales(kScales).isOk());
  ASSERT_TRUE(b.allocateKvPools(KvPoolGeometry{kBlocks, kLayers, kKvHeads, kHeadDim, kTpb, DType::kF8E4M3}, 2)
                  .isOk());
  Step s(1);
  ASSERT_TRUE(b.beginStep(s.in).isOk());
  // Layer 0's K scale is 0.5: 1.0 -> code 2 -> 1.0; 0.3 -> 0.6 -> code 0.625 (nearest) -> 0.3125;
  // 1000 and -300 saturate at code +-448 -> +-224; 2^-12 -> 2^-11: below half the smallest
  // subnormal code (2^-9) -> 0; 0.001 -> 0.002 -> code 2^-9 (nearest subnormal) -> 2^-10.
  const std::vector<float> k = {1.0f, 0.3f, 1000.0f, -300.0f, 0x1p-12f, 0.001f, -0.0f, 7.0f,
                                0,    0,    0,       0,       0,        0,      0,     0};
  const std::vector<float> v(16, 0.0f);
  std::vector<float> kk = k, vv = v;
  b.ropeWriteKv(0, TensorView(kk.data(), DType::kF32, Shape{1, 0}),
                TensorView(kk.data(), DType::kF32, Shape{1, 16}),
                TensorView(vv.data(), DType::kF32, Shape{1, 16}), kHeadDim);
  const std::vector<float> got = block(b, KvPool::kPrimary, 0);
  const std::vector<float> want = {1.0f, 0.3125f, 224.0f, -224.0f, 0.0f, 0x1p-10f, -0.0f, 7.0f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "feature " << i;
  EXPECT_TRUE(std::signbit(got[6]));
}

TEST(CpuFp8Kv, AttentionIsAttentionOverTheValues) {
  std::mt19937 rng(5);
  const int64_t n = 19, heads = 4, kv = kKvHeads * kHeadDim;
  CpuBackend fp8(2), f32(2);
  ASSERT_TRUE(fp8.setKvCacheScales(kScales).isOk());
  ASSERT_TRUE(
      fp8.allocateKvPools(KvPoolGeometry{kBlocks, kLayers, kKvHeads, kHeadDim, kTpb, DType::kF8E4M3}, 2)
          .isOk());
  ASSERT_TRUE(
      f32.allocateKvPools(KvPoolGeometry{kBlocks, kLayers, kKvHeads, kHeadDim, kTpb, DType::kF32}, 2).isOk());
  Step s(n);
  ASSERT_TRUE(fp8.beginStep(s.in).isOk());
  ASSERT_TRUE(f32.beginStep(s.in).isOk());
  const std::vector<float> k = optest::randomVec(static_cast<size_t>(n * kv), rng, 3.0f);
  const std::vector<float> v = optest::randomVec(static_cast<size_t>(n * kv), rng, 0.5f);
  writeRows(fp8, n, k, v);
  // The float32 pool gets what the FP8 one holds: each layer's rows as code * scale.
  for (int32_t blk = 0; blk < static_cast<int32_t>(s.table.size()); ++blk) {
    const std::vector<float> vals = block(fp8, KvPool::kPrimary, blk);
    for (size_t i = 0; i < vals.size(); ++i) {
      const size_t layer_kv = i / static_cast<size_t>(kKvHeads * kTpb * kHeadDim);
      const float scale = kScales[layer_kv];
      ASSERT_EQ(vals[i], f8e4m3ToF32(f32ToF8e4m3(vals[i] / scale)) * scale) << "a code times its scale";
    }
  }
  std::vector<float> k2(static_cast<size_t>(n * kv)), v2(k2.size());
  for (int64_t layer = 0; layer < kLayers; ++layer) {
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<float> vals = block(fp8, KvPool::kPrimary, s.table[static_cast<size_t>(t / kTpb)]);
      for (int kvi = 0; kvi < 2; ++kvi)
        for (int64_t h = 0; h < kKvHeads; ++h)
          for (int64_t d = 0; d < kHeadDim; ++d) {
            const int64_t at = (((layer * 2 + kvi) * kKvHeads + h) * kTpb + t % kTpb) * kHeadDim + d;
            (kvi == 0 ? k2 : v2)[static_cast<size_t>(t * kv + h * kHeadDim + d)] =
                vals[static_cast<size_t>(at)];
          }
    }
    TensorView kt(k2.data(), DType::kF32, Shape{n, kv}), vt(v2.data(), DType::kF32, Shape{n, kv});
    f32.ropeWriteKv(layer, TensorView(k2.data(), DType::kF32, Shape{n, 0}), kt, vt, kHeadDim);
  }
  std::vector<float> q = optest::randomVec(static_cast<size_t>(n * heads * kHeadDim), rng);
  std::vector<float> o1(q.size()), o2(q.size());
  const TensorView qv(q.data(), DType::kF32, Shape{n, heads * kHeadDim});
  for (int64_t layer = 0; layer < kLayers; ++layer) {
    fp8.attention(layer, qv, heads, 0, 0.35f, TensorView(o1.data(), DType::kF32, Shape{n, heads * kHeadDim}));
    f32.attention(layer, qv, heads, 0, 0.35f, TensorView(o2.data(), DType::kF32, Shape{n, heads * kHeadDim}));
    EXPECT_EQ(0, std::memcmp(o1.data(), o2.data(), o1.size() * sizeof(float))) << "layer " << layer;
  }
  // Offload and onboard, and a partial copy, move the codes.
  const std::vector<KvBlockCopy> copies{{KvPool::kPrimary, 2, KvPool::kSecondary, 1, -1},
                                        {KvPool::kSecondary, 1, KvPool::kPrimary, 5, -1},
                                        {KvPool::kPrimary, 0, KvPool::kPrimary, 4, 3}};
  ASSERT_TRUE(fp8.copyKvBlocks(copies).isOk());
  EXPECT_EQ(block(fp8, KvPool::kPrimary, 5), block(fp8, KvPool::kPrimary, 2));
  const std::vector<float> b0 = block(fp8, KvPool::kPrimary, 0), b4 = block(fp8, KvPool::kPrimary, 4);
  for (size_t i = 0; i < b0.size(); ++i)
    if (static_cast<int64_t>(i) / kHeadDim % kTpb < 3) EXPECT_EQ(b4[i], b0[i]) << i;
}

TEST(CpuFp8Kv, BadScalesAreRefused) {
  CpuBackend b(1);
  const std::vector<std::vector<float>> bad = {
      {1.0f}, {1.0f, 0.0f}, {-1.0f, 1.0f}, {NAN, 1.0f}, {1.0f, INFINITY}};
  for (const std::vector<float>& s : bad) {
    const Status st = b.setKvCacheScales(s);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.toString();
    EXPECT_NE(st.message().find("setKvCacheScales"), std::string::npos) << st.toString();
  }
  EXPECT_TRUE(b.setKvCacheScales(kScales).isOk());
}

}  // namespace
}  // namespace llmrt
