// The FP8 KV cache (E4M3 codes, a K and a V scale per layer: core/fp8.h's Fp8KvScale rule) on
// the CUDA backend against the CPU reference holding the same codes: the writes (the same codes;
// after RoPE within one code of each other, the rotations' float32 roundings differing), block
// copies, and attention on every kernel that reads the codes (the tensor-core context and decode
// kernels, which turn them into fp16 in shared memory, and the CUDA-core decode kernel).
// Skipped without the CUDA backend or without a device.
#include "backend_ops_fixture.h"

namespace llmrt {
namespace {

class BackendFp8Kv : public BackendOps {};

// Every value of the pools as float32 (code * scale).
std::vector<float> wholePool(Backend& b, const KvPoolGeometry& g) {
  const size_t per = static_cast<size_t>(g.elementsPerBlock());
  std::vector<float> all(per * static_cast<size_t>(g.num_blocks));
  for (int32_t blk = 0; blk < g.num_blocks; ++blk)
    EXPECT_TRUE(b.readKvBlock(KvPool::kPrimary, blk, all.data() + per * static_cast<size_t>(blk)).isOk());
  return all;
}

TEST_P(BackendFp8Kv, WritesTheReferencesCodes) {
  ASSERT_EQ(gpu_->kvGeometry().dtype, DType::kF8E4M3);
  for (int64_t rotary : {int64_t{0}, int64_t{128}, int64_t{64}}) {
    SCOPED_TRACE("rotary " + std::to_string(rotary));
    const int64_t hd = 128, kvh = 2, qh = 8, n = 23, tpb = 16, blocks = 6, layers = 2;
    const int64_t Q = qh * hd, KV = kvh * hd;
    const KvPoolGeometry g{blocks, layers, kvh, hd, tpb, DType::kF8E4M3};
    ASSERT_TRUE(cpu_->allocateKvPools(g, 2).isOk());
    ASSERT_TRUE(gpu_->allocateKvPools(g, 2).isOk());
    const std::vector<float> inv = twoRopeTables(rotary, 10000.0f);
    std::vector<int32_t> ids(static_cast<size_t>(n), 0), pos(static_cast<size_t>(n));
    std::uniform_int_distribution<int32_t> pd(0, 3000);
    for (int32_t& p : pos) p = pd(rng_);
    std::vector<int64_t> all(static_cast<size_t>(blocks * tpb)), slots(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng_);
    std::copy(all.begin(), all.begin() + n, slots.begin());
    slots[5] = -1;
    std::vector<int32_t> table(static_cast<size_t>(blocks));
    std::iota(table.begin(), table.end(), 0);
    std::vector<StepSeq> seqs{StepSeq{0, 9, 9, table, 1}, StepSeq{9, n - 9, n - 9, table, 0}};
    begin(ropeStep(ids, pos, slots, seqs, inv, rotary, 1.0f));
    for (int64_t layer = 0; layer < layers; ++layer) {
      // Values up to 8x the codes' reach for layer 1's K (saturated to +-448 codes on both).
      std::vector<float> qkv =
          randomVec(static_cast<size_t>(n * (Q + 2 * KV)), rng_, layer == 1 ? 8.0f : 1.0f);
      auto [c, gv] = put(0, n, Q + 2 * KV, qkv);
      cpu_->ropeWriteKv(layer, columns(c, 0, Q), columns(c, Q, KV), columns(c, Q + KV, KV), hd);
      gpu_->ropeWriteKv(layer, columns(gv, 0, Q), columns(gv, Q, KV), columns(gv, Q + KV, KV), hd);
    }
    const std::vector<float> want = wholePool(*cpu_, g), got = wholePool(*gpu_, g);
    if (rotary == 0) {
      EXPECT_EQ(got, want) << "unrotated rows: the same codes";
    } else {  // one code apart at most (a relative step of 2^-3; subnormals: 2^-9 x scale)
      expectClose(got, want, 1e-2, 0.015 * 0x1p-9, "pools", 0.125);
    }
    float biggest = 0.0f;
    for (float v : want) biggest = std::max(biggest, std::fabs(v));
    EXPECT_EQ(biggest, 448.0f * 0.0125f) << "layer 1's K saturates at the largest code";
    // Offload and onboard move the codes: the round trip changes nothing.
    const std::vector<KvBlockCopy> copies{{KvPool::kPrimary, 3, KvPool::kSecondary, 1, -1},
                                          {KvPool::kSecondary, 1, KvPool::kPrimary, 0, -1},
                                          {KvPool::kPrimary, 2, KvPool::kPrimary, 5, 7}};
    ASSERT_TRUE(cpu_->copyKvBlocks(copies).isOk());
    ASSERT_TRUE(gpu_->copyKvBlocks(copies).isOk());
    const std::vector<float> want2 = wholePool(*cpu_, g), got2 = wholePool(*gpu_, g);
    const size_t per = static_cast<size_t>(g.elementsPerBlock());
    EXPECT_TRUE(std::equal(want2.begin(), want2.begin() + per, want.begin() + 3 * per))
        << "CPU: block 3 -> host -> 0";
    EXPECT_TRUE(std::equal(got2.begin(), got2.begin() + per, got.begin() + 3 * per)) << "GPU: block 3 -> host -> 0";
    if (rotary == 0) EXPECT_EQ(got2, want2);
  }
}

TEST_P(BackendFp8Kv, AttentionReadsTheCodes) {
  struct Case {
    int64_t head_dim, heads, kv_heads, tpb, window;
  };
  // Tensor-core kernels: context chunks at head_dim 64 / 128, decode rows at 64 / 128 / 256 (any
  // group); 96: the CUDA-core one.
  const std::vector<Case> cases{{64, 8, 8, 16, 0},     {128, 32, 8, 16, 0}, {128, 16, 4, 32, 20},
                                {128, 32, 8, 16, 100}, {96, 12, 3, 8, 0},   {64, 16, 1, 16, 0},
                                {256, 8, 2, 16, 0},    {64, 71, 1, 16, 0}};
  const bool mma = GetParam().tuning.mma_decode;
  for (const Case& c : cases) {
    const std::vector<SeqSpec> mixed{{37, 37}, {1, 100}, {21, 70}, {1, 2 * c.tpb}, {5, 2 * c.tpb + 1}};
    const std::vector<SeqSpec> decode{{1, 700}, {1, 333}, {1, 1}};
    for (const auto* specs : {&mixed, &decode}) {
      SCOPED_TRACE(std::string(specs == &mixed ? "mixed" : "decode") + " hd " + std::to_string(c.head_dim) +
                   " heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " window " +
                   std::to_string(c.window));
      const int64_t layers = 2, Q = c.heads * c.head_dim;
      KvPoolGeometry g;
      const std::vector<std::vector<int32_t>> tables =
          fillWithTables(*this, kvLens(*specs), 8, layers, c.kv_heads, c.head_dim, c.tpb, rng_, &g);
      ASSERT_EQ(wholePool(*gpu_, gpu_->kvGeometry()), wholePool(*cpu_, cpu_->kvGeometry()))
          << "the same codes";
      const StepRows st = stepRows(*specs, tables, c.tpb, false, false);
      begin(ropeStep(st.ids, st.pos, st.slots, st.seqs, {}, 0, 1.0f));
      auto [qc, qg] = put(2, st.rows, Q, randomVec(static_cast<size_t>(st.rows * Q), rng_, 2.0f));
      auto [oc, og] = put(3, st.rows, Q, {});
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      const bool flash_dim = c.head_dim == 64 || c.head_dim == 128;
      const bool tensor = (specs == &mixed && flash_dim) || (mma && (flash_dim || c.head_dim == 256));
      for (int64_t layer = 0; layer < layers; ++layer) {
        cpu_->attention(layer, qc, c.heads, c.window, scale, oc);
        gpu_->attention(layer, qg, c.heads, c.window, scale, og);
        // Tensor cores: q in two fp16 parts, P rounded to fp16 (as an fp16 cache); the CUDA cores
        // compute in float32 with K's scale folded into q.
        expectClose(get(*gpu_, og), get(*cpu_, oc), tensor ? 5e-3 : 1e-4, tensor ? 3e-2 : 5e-4,
                    "attention layer " + std::to_string(layer));
      }
    }
  }
}

// A decode step through ropeAttention: never the one-kernel path (it writes 16-bit rows), so q ends
// rotated in memory, and the pool and output are ropeWriteKv + attention's to the bit.
TEST_P(BackendFp8Kv, RopeAttentionIsTheTwoOps) {
  const int64_t hd = 128, heads = 32, kv_heads = 8, tpb = 16, layers = 2, Q = heads * hd, KV = kv_heads * hd;
  const std::vector<SeqSpec> decode{{1, 700}, {1, 333}, {1, 1}, {1, 33}};
  KvPoolGeometry g;
  const std::vector<std::vector<int32_t>> tables =
      fillWithTables(*this, kvLens(decode), 4, layers, kv_heads, hd, tpb, rng_, &g);
  const StepRows st = stepRows(decode, tables, tpb, true, true);
  const std::vector<float> inv = twoRopeTables(hd, 500000.0f);
  begin(ropeStep(st.ids, st.pos, st.slots, st.seqs, inv, hd, 1.0f));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t layer = 0; layer < layers; ++layer) {
    const std::vector<float> qkv = randomVec(static_cast<size_t>(st.rows * (Q + 2 * KV)), rng_);
    auto [qc, qg] = put(2, st.rows, Q + 2 * KV, qkv);
    auto [oc, og] = put(3, st.rows, Q, {});
    cpu_->ropeAttention(layer, columns(qc, 0, Q), columns(qc, Q, KV), columns(qc, Q + KV, KV), hd, heads, 0,
                        scale, oc);
    gpu_->ropeAttention(layer, columns(qg, 0, Q), columns(qg, Q, KV), columns(qg, Q + KV, KV), hd, heads, 0,
                        scale, og);
    const std::vector<float> out_one = get(*gpu_, og), pool_one = wholePool(*gpu_, gpu_->kvGeometry());
    EXPECT_NE(get(*gpu_, qg), qkv) << "q rotated in memory: the two ops ran";
    auto [qc2, qg2] = put(4, st.rows, Q + 2 * KV, qkv);
    auto [oc2, og2] = put(5, st.rows, Q, {});
    gpu_->ropeWriteKv(layer, columns(qg2, 0, Q), columns(qg2, Q, KV), columns(qg2, Q + KV, KV), hd);
    gpu_->attention(layer, columns(qg2, 0, Q), heads, 0, scale, og2);
    EXPECT_EQ(out_one, get(*gpu_, og2));
    EXPECT_EQ(pool_one, wholePool(*gpu_, gpu_->kvGeometry()));
    expectClose(out_one, get(*cpu_, oc), 5e-3, 3e-2, "vs the CPU");
  }
}

Mode fp8NoMma() {
  Mode m{DType::kBF16, DType::kF8E4M3, "bf16_fp8_kv_cuda_cores"};
  m.tuning.mma_decode = false;
  return m;
}

INSTANTIATE_TEST_SUITE_P(Modes, BackendFp8Kv,
                         ::testing::Values(Mode{DType::kBF16, DType::kF8E4M3, "bf16_fp8_kv"},
                                           Mode{DType::kF16, DType::kF8E4M3, "fp16_fp8_kv"},
                                           Mode{DType::kF32, DType::kF8E4M3, "f32_fp8_kv"}, fp8NoMma()),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace llmrt
