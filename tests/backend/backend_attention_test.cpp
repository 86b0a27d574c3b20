// Cross-backend tests of the KV cache and attention ops (RoPE + KV write, block copies, paged
// attention over mixed / decode / long steps and large GQA groups, the fused RoPE-attention):
// the CPU reference against the CUDA backend, in the modes of backend_ops_test.cpp (which
// instantiates the BackendOps suite). Skipped without the CUDA backend or without a device.
#include "backend_ops_fixture.h"

namespace llmrt {
namespace {


TEST_P(BackendOps, RopeWriteKv) {
  struct Case {
    int64_t head_dim, rotary_dim, q_heads, k_heads;
    float scaling;
  };
  // All but the last case take the CUDA float4 kernel; rotary 6 (an odd half) takes the scalar one.
  for (const Case& c : {Case{64, 64, 8, 2, 1.0f}, Case{128, 128, 4, 4, 1.0f}, Case{64, 32, 4, 1, 1.25f},
                        Case{8, 8, 8, 4, 1.0f}, Case{64, 0, 2, 2, 1.0f}, Case{12, 6, 3, 1, 1.0f}}) {
    const std::string what = "head_dim " + std::to_string(c.head_dim) + " rotary " + std::to_string(c.rotary_dim);
    SCOPED_TRACE(what);
    const int64_t n = 23, Q = c.q_heads * c.head_dim, KV = c.k_heads * c.head_dim, tpb = 8, blocks = 6;
    KvPoolGeometry g{blocks, 2, c.k_heads, c.head_dim, tpb, DType::kF32};
    KvPoolGeometry gg = g;
    gg.dtype = gpuKv();
    ASSERT_TRUE(cpu_->allocateKvPools(g, 0).isOk());
    ASSERT_TRUE(gpu_->allocateKvPools(gg, 0).isOk());
    // Two RoPE tables (as dynamic NTK gives per sequence): sequence 0 uses table 1, sequence 1 table 0.
    const std::vector<float> inv = twoRopeTables(c.rotary_dim, 10000.0f);
    std::vector<int32_t> ids(static_cast<size_t>(n), 0), pos(static_cast<size_t>(n));
    std::uniform_int_distribution<int32_t> pd(0, 5000);
    for (int32_t& p : pos) p = pd(rng_);
    // Random distinct slots, a few rows not written (-1).
    std::vector<int64_t> all(static_cast<size_t>(blocks * tpb)), slots(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng_);
    std::copy(all.begin(), all.begin() + n, slots.begin());
    slots[3] = -1;
    slots[17] = -1;
    std::vector<int32_t> table(static_cast<size_t>(blocks));
    std::iota(table.begin(), table.end(), 0);
    std::vector<StepSeq> seqs{StepSeq{0, 9, 9, table, 1}, StepSeq{9, n - 9, n - 9, table, 0}};
    begin(ropeStep(ids, pos, slots, seqs, inv, c.rotary_dim, c.scaling));
    std::vector<float> qkv = randomVec(static_cast<size_t>(n * (Q + 2 * KV)), rng_);
    roundTo(qkv, gpuKv());  // values the 16-bit pool stores exactly when not rotated
    auto [qkvc, qkvg] = put(0, n, Q + 2 * KV, qkv);
    for (int64_t layer : {1, 0}) {
      cpu_->ropeWriteKv(layer, columns(qkvc, 0, Q), columns(qkvc, Q, KV), columns(qkvc, Q + KV, KV), c.head_dim);
      gpu_->ropeWriteKv(layer, columns(qkvg, 0, Q), columns(qkvg, Q, KV), columns(qkvg, Q + KV, KV), c.head_dim);
      // (Layer 0 rotates the already rotated rows again: the second call checks the same math.)
    }
    expectClose(get(*gpu_, qkvg), get(*cpu_, qkvc), 1e-6, 1e-5, "rotated q/k");
    // The pools: rotated keys rounded to the cache's 16-bit type.
    const size_t per = static_cast<size_t>(g.elementsPerBlock());
    std::vector<float> a(per), b(per);
    for (int32_t blk = 0; blk < blocks; ++blk) {
      ASSERT_TRUE(cpu_->readKvBlock(KvPool::kPrimary, blk, a.data()).isOk());
      ASSERT_TRUE(gpu_->readKvBlock(KvPool::kPrimary, blk, b.data()).isOk());
      expectClose(b, a, halfKv() ? 4e-3 : 1e-6, halfKv() ? 0.05 : 1e-5, "pool block " + std::to_string(blk),
                  halfStep(gpuKv()));
    }
  }
}

TEST_P(BackendOps, WriteKvAndCopyBlocks) {
  KvPoolGeometry g{12, 3, 2, 64, 16, DType::kF32};
  KvPoolGeometry gg = g;
  gg.dtype = gpuKv();
  ASSERT_TRUE(cpu_->allocateKvPools(g, 4).isOk());
  ASSERT_TRUE(gpu_->allocateKvPools(gg, 4).isOk());
  const int64_t KV = g.num_kv_heads * g.head_dim, slots_n = 37;
  std::vector<int64_t> slots(static_cast<size_t>(slots_n));
  std::vector<int64_t> all(static_cast<size_t>(g.num_blocks * g.tokens_per_block));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng_);
  std::copy(all.begin(), all.begin() + slots_n, slots.begin());
  std::vector<int32_t> ids(static_cast<size_t>(slots_n), 0), pos(static_cast<size_t>(slots_n), 0);
  std::vector<int32_t> table(static_cast<size_t>(g.num_blocks));
  std::iota(table.begin(), table.end(), 0);
  const StepSeq seq{0, slots_n, slots_n, table, 0};
  StepInputs in;
  in.token_ids = ids;
  in.positions = pos;
  in.slots = slots;
  in.seqs = std::span<const StepSeq>(&seq, 1);
  begin(in);  // rotary_dim 0: the rows are written as they are
  for (int64_t layer = 0; layer < g.num_layers; ++layer) {
    std::vector<float> kv = randomVec(static_cast<size_t>(slots_n * (2 * KV + 3)), rng_);
    roundTo(kv, gpuKv());
    auto [c, gv] = put(0, slots_n, 2 * KV + 3, kv);
    cpu_->ropeWriteKv(layer, columns(c, 1, 0), columns(c, 1, KV), columns(c, 1 + KV, KV), g.head_dim);
    gpu_->ropeWriteKv(layer, columns(gv, 1, 0), columns(gv, 1, KV), columns(gv, 1 + KV, KV), g.head_dim);
  }
  std::vector<KvBlockCopy> copies{
      {KvPool::kPrimary, 3, KvPool::kSecondary, 1, -1},
      {KvPool::kSecondary, 1, KvPool::kPrimary, 10, -1},
      {KvPool::kPrimary, 5, KvPool::kPrimary, 11, 7},
      {KvPool::kPrimary, 6, KvPool::kSecondary, 2, 9},
      {KvPool::kPrimary, 0, KvPool::kPrimary, 9, 16},
  };
  ASSERT_TRUE(cpu_->copyKvBlocks(copies).isOk());
  ASSERT_TRUE(gpu_->copyKvBlocks(copies).isOk());
  const size_t per = static_cast<size_t>(g.elementsPerBlock());
  std::vector<float> a(per), b(per);
  for (KvPool pool : {KvPool::kPrimary, KvPool::kSecondary}) {
    const int32_t n = pool == KvPool::kPrimary ? static_cast<int32_t>(g.num_blocks) : 4;
    for (int32_t blk = 0; blk < n; ++blk) {
      ASSERT_TRUE(cpu_->readKvBlock(pool, blk, a.data()).isOk());
      ASSERT_TRUE(gpu_->readKvBlock(pool, blk, b.data()).isOk());
      expectClose(b, a, 0.0, 0.0,
                  std::string(pool == KvPool::kPrimary ? "primary" : "secondary") + " block " +
                      std::to_string(blk));
    }
  }
  EXPECT_FALSE(gpu_->readKvBlock(KvPool::kSecondary, 4, b.data()).isOk());
  // A list with one bad id is refused whole (nothing enqueued) and the backend keeps working.
  std::vector<KvBlockCopy> bad{{KvPool::kPrimary, 4, KvPool::kSecondary, 0, -1},
                               {KvPool::kSecondary, 4, KvPool::kPrimary, 1, -1}};
  EXPECT_FALSE(gpu_->copyKvBlocks(bad).isOk());
  ASSERT_TRUE(gpu_->readKvBlock(KvPool::kSecondary, 0, b.data()).isOk());
  ASSERT_TRUE(cpu_->readKvBlock(KvPool::kSecondary, 0, a.data()).isOk());
  expectClose(b, a, 0.0, 0.0, "secondary block 0 after a refused list");
}

TEST_P(BackendOps, PagedAttention) {
  struct Case {
    int64_t head_dim, heads, kv_heads, tpb, window;
  };
  // GQA group 16: two CTA chunks per KV head; large groups (Falcon-7B: 71): more chunks.
  const std::vector<Case> cases{
      {64, 8, 8, 16, 0},  {64, 8, 8, 16, 7},    {128, 16, 4, 16, 0},   {128, 16, 4, 32, 20},
      {64, 32, 4, 16, 0}, {64, 32, 4, 16, 16},  {8, 8, 4, 16, 0},      {256, 4, 2, 16, 0},
      {96, 12, 3, 8, 0},  {128, 32, 8, 16, 0},  {128, 32, 8, 16, 100}, {64, 16, 1, 16, 0},
      {64, 71, 1, 16, 0}, {128, 66, 2, 16, 24}, {256, 40, 2, 16, 0},
  };
  for (const Case& c : cases) {
    // Mixed: prefill, long decode, a chunk after a shared cached prefix, decode at a block
    // boundary, a short chunk crossing one. Decode only: few rows with long contexts, so the
    // GPU splits the keys (flash-decoding) and merges.
    const std::vector<SeqSpec> mixed{{37, 37}, {1, 100}, {21, 70}, {1, 2 * c.tpb}, {5, 2 * c.tpb + 1}};
    const std::vector<SeqSpec> decode{{1, 700}, {1, 333}, {1, 1}};
    // Groups past 32 heads: 8 rows of long contexts, whose splits' partial states would overflow
    // the GPU's buffer unless the op takes fewer splits.
    const std::vector<SeqSpec> wide(8, SeqSpec{1, 1500});
    std::vector<const std::vector<SeqSpec>*> runs{&mixed, &decode};
    if (c.heads / c.kv_heads > 32) runs.push_back(&wide);
    for (const auto* specs : runs) {
      const std::string what = std::string(specs == &mixed    ? "mixed"
                                           : specs == &decode ? "decode"
                                                              : "wide") +
                               " hd " + std::to_string(c.head_dim) + " heads " + std::to_string(c.heads) +
                               "/" + std::to_string(c.kv_heads) + " tpb " + std::to_string(c.tpb) +
                               " window " + std::to_string(c.window);
      SCOPED_TRACE(what);
      const int64_t layers = 2, Q = c.heads * c.head_dim, KV = c.kv_heads * c.head_dim;
      // Block tables are random blocks; the chunked sequence shares its first two blocks with
      // the prefill one (prefix reuse).
      KvPoolGeometry g;
      std::vector<std::vector<int32_t>> tables =
          fillWithTables(*this, kvLens(*specs), 8, layers, c.kv_heads, c.head_dim, c.tpb, rng_, &g);
      if (specs == &mixed) {
        tables[2][0] = tables[0][0];
        tables[2][1] = tables[0][1];
      }
      // Nothing written: the pools hold the keys already.
      const StepRows st = stepRows(*specs, tables, c.tpb, false, false);
      const int64_t rows = st.rows;
      begin(ropeStep(st.ids, st.pos, st.slots, st.seqs, {}, 0, 1.0f));
      std::vector<float> q = randomVec(static_cast<size_t>(rows * (Q + 2 * KV)), rng_);
      auto [qc, qg] = put(2, rows, Q + 2 * KV, q);
      auto [oc, og] = put(3, rows, Q, {});
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      for (int64_t layer = 0; layer < layers; ++layer) {
        cpu_->attention(layer, columns(qc, 0, Q), c.heads, c.window, scale, oc);
        gpu_->attention(layer, columns(qg, 0, Q), c.heads, c.window, scale, og);
        // 16-bit cache: context chunks (head_dim 64/128) and decode rows (head_dim 64/128/256, any
        // group) run on tensor cores with P rounded to the cache's type.
        const bool flash = halfKv() && (c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256);
        const std::vector<float> ref = get(*cpu_, oc);
        expectClose(get(*gpu_, og), ref, flash ? 5e-3 : 1e-5, flash ? 3e-2 : 5e-5,
                    "attention layer " + std::to_string(layer));
        if (const DType act = gpu_->activationDtype(); act != DType::kF32) {  // the output rounded as well
          TensorView ob = gpu_->scratch(5, rows, Q, act);
          gpu_->attention(layer, columns(qg, 0, Q), c.heads, c.window, scale, ob);
          expectClose(get(*gpu_, ob), ref, flash ? 6e-3 : 3e-3, flash ? 3e-2 : 1e-2,
                      "attention (" + std::string(dtypeName(act)) + " out) layer " + std::to_string(layer),
                      halfStep(act));
        }
      }
    }
  }
}

// ropeAttention against ropeWriteKv + attention on the same backend: on the CUDA backend a decode
// step (every sequence one new row) on the tensor-core decode kernel (16-bit cache, head_dim 64 /
// 128 / 256, any GQA group, a rotary dim that is a multiple of 16) runs as one kernel that rotates q in
// registers (q in memory stays as it was: that is how the test knows the fused kernel ran) and k, and writes
// the KV itself; every other step runs the two ops. Either way the output and the pool are the two ops' to
// the bit, and close to the CPU's.
TEST_P(BackendOps, RopeAttentionIsRopeThenAttention) {
  struct Case {
    int64_t head_dim, heads, kv_heads, tpb, window, rotary_dim;
    bool decode;  // one new row per sequence (else a mixed step with a prefill)
  };
  const std::vector<Case> cases{
      {128, 32, 8, 16, 0, 128, true}, {128, 16, 2, 32, 0, 128, true},
      {64, 8, 8, 16, 0, 64, true},    {64, 32, 4, 16, 100, 64, true},
      {128, 8, 8, 16, 37, 128, true}, {64, 16, 1, 16, 0, 64, true},  // group 16: 2 chunks
      {128, 32, 8, 16, 0, 64, true},  {128, 32, 8, 16, 0, 128, false},
      {128, 32, 32, 16, 0, 0, true},  {64, 16, 2, 16, 50, 0, true},    // no rotary: the KV write alone
      {256, 8, 8, 16, 0, 256, true},  {256, 16, 16, 16, 0, 64, true},  // head_dim 256 (Gemma-2; GPT-J)
      {256, 8, 4, 16, 0, 256, false}, {64, 71, 1, 16, 0, 64, true},    // Falcon-7B's group: 9 CTA chunks
      {128, 16, 16, 16, 0, 32, true}, {128, 16, 4, 16, 0, 24, true},   // Pythia's 25%; 24: the two ops
  };
  for (const Case& c : cases) {
    const std::vector<SeqSpec> decode{{1, 700}, {1, 333}, {1, 1}, {1, 2 * c.tpb}, {1, 2 * c.tpb + 1},
                                      {1, 64, false}, {1, 129}};
    const std::vector<SeqSpec> mixed{{37, 37}, {1, 100}, {1, 2 * c.tpb + 1}};
    const std::vector<SeqSpec>& specs = c.decode ? decode : mixed;
    // Without the fused kernel or the tensor-core decode kernel: the two ops always.
    const bool switched_off = !GetParam().tuning.rope_fusion || !GetParam().tuning.mma_decode;
    const bool mma_dim = c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256;
    const bool fused = halfKv() && c.decode && mma_dim && c.rotary_dim % 16 == 0 && !switched_off;
    SCOPED_TRACE("hd " + std::to_string(c.head_dim) + " heads " + std::to_string(c.heads) + "/" +
                 std::to_string(c.kv_heads) + " tpb " + std::to_string(c.tpb) + " window " + std::to_string(c.window) +
                 " rotary " + std::to_string(c.rotary_dim) + (c.decode ? " decode" : " mixed") +
                 (fused ? " (fused)" : ""));
    const int64_t layers = 2, Q = c.heads * c.head_dim, KV = c.kv_heads * c.head_dim;
    KvPoolGeometry g;
    const std::vector<std::vector<int32_t>> tables =
        fillWithTables(*this, kvLens(specs), 4, layers, c.kv_heads, c.head_dim, c.tpb, rng_, &g);
    const int64_t num_blocks = g.num_blocks;
    // Two RoPE tables (per-sequence tables, as dynamic NTK gives): odd sequences use table 1.
    const StepRows st = stepRows(specs, tables, c.tpb, true, true);
    const int64_t rows = st.rows;
    const std::vector<float> inv = twoRopeTables(c.rotary_dim, 500000.0f);
    begin(ropeStep(st.ids, st.pos, st.slots, st.seqs, inv, c.rotary_dim, 1.25f));
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const size_t per = static_cast<size_t>(g.elementsPerBlock());
    auto pools = [&](Backend& b) {
      std::vector<float> all(per * static_cast<size_t>(num_blocks));
      for (int32_t blk = 0; blk < num_blocks; ++blk)
        EXPECT_TRUE(b.readKvBlock(KvPool::kPrimary, blk, all.data() + per * static_cast<size_t>(blk)).isOk());
      return all;
    };
    for (int64_t layer = 0; layer < layers; ++layer) {
      SCOPED_TRACE("layer " + std::to_string(layer));
      const std::vector<float> qkv = randomVec(static_cast<size_t>(rows * (Q + 2 * KV)), rng_);
      auto [qc, qg] = put(2, rows, Q + 2 * KV, qkv);
      auto [oc, og] = put(3, rows, Q, {});
      cpu_->ropeAttention(layer, columns(qc, 0, Q), columns(qc, Q, KV), columns(qc, Q + KV, KV), c.head_dim,
                          c.heads, c.window, scale, oc);
      gpu_->ropeAttention(layer, columns(qg, 0, Q), columns(qg, Q, KV), columns(qg, Q + KV, KV), c.head_dim,
                          c.heads, c.window, scale, og);
      const std::vector<float> out_one = get(*gpu_, og), pool_one = pools(*gpu_), q_after = get(*gpu_, qg);
      bool q_kept = true;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < Q; ++j)
          q_kept = q_kept && q_after[static_cast<size_t>(r * (Q + 2 * KV) + j)] == qkv[static_cast<size_t>(r * (Q + 2 * KV) + j)];
      // (Without rotary embeddings neither path rotates q.)
      EXPECT_EQ(q_kept, fused || c.rotary_dim == 0) << "q left unrotated <=> the one-kernel path ran";
      // The two ops on a fresh copy (they write the same slots again).
      auto [qc2, qg2] = put(4, rows, Q + 2 * KV, qkv);
      auto [oc2, og2] = put(5, rows, Q, {});
      gpu_->ropeWriteKv(layer, columns(qg2, 0, Q), columns(qg2, Q, KV), columns(qg2, Q + KV, KV), c.head_dim);
      gpu_->attention(layer, columns(qg2, 0, Q), c.heads, c.window, scale, og2);
      const std::vector<float> out_two = get(*gpu_, og2), pool_two = pools(*gpu_);
      EXPECT_EQ(0, std::memcmp(out_one.data(), out_two.data(), out_one.size() * sizeof(float)))
          << "ropeAttention's output differs from ropeWriteKv + attention";
      EXPECT_EQ(0, std::memcmp(pool_one.data(), pool_two.data(), pool_one.size() * sizeof(float)))
          << "ropeAttention's pool differs from ropeWriteKv's";
      // (The new rows' k / v are rounded to a 16-bit cache on the GPU, kept float32 on the CPU.)
      const bool flash = halfKv() && (c.decode ? mma_dim : (c.head_dim == 64 || c.head_dim == 128));
      expectClose(out_one, get(*cpu_, oc), flash ? 5e-3 : (halfKv() ? 3e-3 : 1e-5),
                  flash ? 3e-2 : (halfKv() ? 1e-2 : 5e-5), "ropeAttention vs the CPU", halfStep(gpuKv()));
      expectClose(pool_one, pools(*cpu_), halfKv() ? 4e-3 : 1e-6, halfKv() ? 0.05 : 1e-5, "pool vs the CPU",
                  halfStep(gpuKv()));
    }
  }
}

// Long contexts in a pool of more than 2^31 elements whose every used block lies beyond element
// 2^31 (byte 4 GiB / 8 GiB), as a serving-sized cache has them: a 2300-token context chunk on
// cached keys beside decode rows of up to 16411 keys (the GPU splits those keys many ways), then a
// decode step through ropeAttention (on the GPU, with a 16-bit cache, the one-kernel path) writing
// its new rows out there; without and with a sliding window. Output and written rows vs the CPU.
TEST_P(BackendOps, LongContextsAtFarPoolOffsets) {
  struct Case {
    int64_t head_dim, heads, kv_heads, tpb;
  };
  for (const Case& c : {Case{128, 16, 4, 16}, Case{64, 16, 2, 32}}) {
    const int64_t layers = 2, Q = c.heads * c.head_dim, KV = c.kv_heads * c.head_dim;
    const int64_t per_block = layers * 2 * c.kv_heads * c.tpb * c.head_dim;
    const int64_t first_block = (int64_t{1} << 31) / per_block + 1;
    // Sequences: the context chunk (300 new of 2300), then decode rows; the same tables serve the
    // decode step after it (each sequence one token longer).
    const std::vector<SeqSpec> chunk{{300, 2300}, {1, 16411}, {1, 5000}, {1, 4099}, {1, 1}};
    std::vector<SeqSpec> next;
    for (const SeqSpec& sp : chunk) next.push_back(SeqSpec{1, sp.kv_len + 1});
    KvPoolGeometry g;
    const std::vector<std::vector<int32_t>> tables =
        fillWithTables(*this, kvLens(next), 2, layers, c.kv_heads, c.head_dim, c.tpb, rng_, &g, first_block);
    ASSERT_GT(g.num_blocks * g.elementsPerBlock(), int64_t{1} << 31);
    const std::vector<float> inv = twoRopeTables(c.head_dim, 500000.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const bool flash = halfKv() && (c.head_dim == 64 || c.head_dim == 128);
    for (int64_t window : {int64_t{0}, int64_t{4096}}) {
      SCOPED_TRACE("hd " + std::to_string(c.head_dim) + " heads " + std::to_string(c.heads) + "/" +
                   std::to_string(c.kv_heads) + " tpb " + std::to_string(c.tpb) + " window " + std::to_string(window));
      // 1. The context chunk and decode rows attend to what the pools hold (nothing written).
      {
        const StepRows st = stepRows(chunk, tables, c.tpb, false, false);
        const int64_t rows = st.rows;
        begin(ropeStep(st.ids, st.pos, st.slots, st.seqs, inv, c.head_dim, 1.0f));
        auto [qc, qg] = put(2, rows, Q, randomVec(static_cast<size_t>(rows * Q), rng_));
        auto [oc, og] = put(3, rows, Q, {});
        for (int64_t layer = 0; layer < layers; ++layer) {
          cpu_->attention(layer, qc, c.heads, window, scale, oc);
          gpu_->attention(layer, qg, c.heads, window, scale, og);
          expectClose(get(*gpu_, og), get(*cpu_, oc), flash ? 5e-3 : 1e-5, flash ? 3e-2 : 5e-5,
                      "attention, layer " + std::to_string(layer));
        }
      }
      // 2. A decode step: each sequence's next token rotated, written and attended in one op.
      {
        const StepRows st = stepRows(next, tables, c.tpb, true, true);
        const int64_t rows = st.rows;
        const std::vector<int64_t>& slots = st.slots;
        begin(ropeStep(st.ids, st.pos, st.slots, st.seqs, inv, c.head_dim, 1.0f));
        const size_t per = static_cast<size_t>(g.elementsPerBlock());
        auto newRows = [&](Backend& b) {  // the blocks holding the new rows
          std::vector<float> all;
          for (int64_t slot : slots) {
            std::vector<float> blk(per);
            EXPECT_TRUE(b.readKvBlock(KvPool::kPrimary, static_cast<int32_t>(slot / c.tpb), blk.data()).isOk());
            all.insert(all.end(), blk.begin(), blk.end());
          }
          return all;
        };
        for (int64_t layer = 0; layer < layers; ++layer) {
          const std::vector<float> qkv = randomVec(static_cast<size_t>(rows * (Q + 2 * KV)), rng_);
          auto [qc, qg] = put(2, rows, Q + 2 * KV, qkv);
          auto [oc, og] = put(3, rows, Q, {});
          cpu_->ropeAttention(layer, columns(qc, 0, Q), columns(qc, Q, KV), columns(qc, Q + KV, KV), c.head_dim,
                              c.heads, window, scale, oc);
          gpu_->ropeAttention(layer, columns(qg, 0, Q), columns(qg, Q, KV), columns(qg, Q + KV, KV), c.head_dim,
                              c.heads, window, scale, og);
          expectClose(get(*gpu_, og), get(*cpu_, oc), flash ? 5e-3 : (halfKv() ? 3e-3 : 1e-5),
                      flash ? 3e-2 : (halfKv() ? 1e-2 : 5e-5), "ropeAttention, layer " + std::to_string(layer),
                      halfStep(gpuKv()));
          expectClose(newRows(*gpu_), newRows(*cpu_), halfKv() ? 4e-3 : 1e-6, halfKv() ? 0.05 : 1e-5,
                      "the new rows' blocks, layer " + std::to_string(layer), halfStep(gpuKv()));
        }
      }
    }
  }
}

}  // namespace
}  // namespace llmrt
