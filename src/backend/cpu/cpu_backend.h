// The CPU backend: the numerical reference. Float32 math everywhere, weights
// converted to float32 at load, OpenBLAS for matrix products, a thread pool
// for everything else. Written to be read; fast enough for small models.
#pragma once

#include <memory>
#include <functional>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/step.h"
#include "core/thread_pool.h"

namespace llmrt {

class CpuBackend : public Backend {  // (not final: tests record what their subclasses are given)
 public:
  explicit CpuBackend(int num_threads = 0);
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::kCpu; }
  int numThreads() const override { return pool_.numThreads(); }

  uint64_t freeMemoryBytes() const override;
  uint64_t totalMemoryBytes() const override;

  Result<TensorView> loadWeight(std::span<const TensorView> parts, const std::string& name,
                                bool borrowable = true) override;
  uint64_t weightBytes() const override { return weight_bytes_; }
  // 8-bit weights: FP8 as float32 code values [out * in] followed by the scales [out]; products
  // emulate the activation quantization exactly (core/fp8.h) and sum the code products with
  // OpenBLAS. INT8 as the codes [out * in] (bytes) followed by the scales (at a float boundary);
  // products quantize x by core/int8.h's rule and sum the code products in int32.
  bool supportsQuantizedWeights(DType codes) const override {
    return codes == DType::kF8E4M3 || codes == DType::kI8;
  }
  Result<TensorView> loadQuantizedWeight(const TensorView& codes, const TensorView& scales, const std::string& name) override;
  TensorView scratch(int slot, int64_t rows, int64_t cols, DType dtype = DType::kF32) override;
  Status copyToHost(const TensorView& src, float* dst) override;
  Status copyFromHost(const float* src, TensorView dst) override;

  Status allocateKvPools(const KvPoolGeometry& primary, int64_t secondary_blocks) override;
  const KvPoolGeometry& kvGeometry() const override { return geometry_; }
  Status copyKvBlocks(std::span<const KvBlockCopy> copies) override;
  Status readKvBlock(KvPool pool, int32_t block, float* dst) override;
  // F32 pools store the values; F8_E4M3 pools their codes (core/fp8.h's Fp8KvScale rule), which
  // attention reads back as code * scale.
  Status setKvCacheScales(std::span<const float> scales) override;

  Status beginStep(const StepInputs& inputs) override;
  void embedding(const TensorView& table, TensorView out) override;
  void rmsNorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) override;
  void linear(const TensorView& x, const TensorView& weight, const TensorView* bias, TensorView out) override;
  // Calibration (SmoothQuant): `observer` sees the input x (F32 [rows, in]) of every product with
  // a weight loaded by name (loadWeight / loadQuantizedWeight), before the product; null: none.
  using ProductObserver = std::function<void(const std::string& weight, const TensorView& x)>;
  void setProductObserver(ProductObserver observer) { observer_ = std::move(observer); }
  void linearAdd(const TensorView& x, const TensorView& weight, const TensorView* bias, TensorView residual) override;
  void gatherLogitRows(const TensorView& src, TensorView out) override;
  void siluMul(const TensorView& gate_up, TensorView out) override;
  void ropeWriteKv(int64_t layer, TensorView q, TensorView k, const TensorView& v, int64_t head_dim) override;
  void layerNorm(const TensorView& x, const TensorView& weight, const TensorView* bias, float eps,
                 TensorView out) override;
  void activation(Activation act, const TensorView& x, TensorView out) override;
  void gatedActivation(Activation act, const TensorView& gate_up, TensorView out) override;
  void addPositionEmbedding(const TensorView& table, TensorView x) override;
  void add(const TensorView& y, TensorView residual) override;
  void scaleSoftcap(TensorView x, float scale, float cap) override;
  Status setAttentionExtras(const AttentionExtras& extras) override;
  void moeAdd(const TensorView& x, const TensorView& router_logits, const TensorView& experts_gate_up,
              const TensorView& experts_down, const MoeRouting& routing, Activation act, TensorView residual) override;
  void sigmoidGatedAdd(const TensorView& y, const TensorView& gate, TensorView residual) override;
  void attention(int64_t layer, const TensorView& q, int64_t num_heads, int64_t sliding_window, float scale,
                 TensorView out) override;

  // Overlapped steps: the ids are computed at once and kept for the next step's fed tokens.
  Result<uint64_t> argmaxRowsAsync(const TensorView& logits) override;
  Status waitArgmax(uint64_t ticket, int32_t* out) override;

  // Anonymous zero-filled memory the OS commits page by page on first touch,
  // so a large pool costs only what is used.
  class LazyBuffer {
   public:
    LazyBuffer() = default;
    ~LazyBuffer();
    LazyBuffer(const LazyBuffer&) = delete;
    LazyBuffer& operator=(const LazyBuffer&) = delete;
    Status allocate(size_t bytes);
    uint8_t* data() const { return data_; }

   private:
    uint8_t* data_ = nullptr;
    size_t bytes_ = 0;
  };

 private:
  // An op writing an 8-bit product's input row-quantized (out F8_E4M3 or I8, rowQuantizedScales):
  // `op` into a float32 temporary, then each row's codes and scale by core/fp8.h's / core/int8.h's
  // rule, as the product quantizes a float32 x.
  void writeQuantized(TensorView out, const std::function<void(TensorView)>& op);
  void linearFp8(const TensorView& x, const TensorView& w, const TensorView* bias, TensorView out);
  void linearInt8(const TensorView& x, const TensorView& w, const TensorView* bias, TensorView out);
  // Address of K (kv=0) or V (kv=1) of `layer`, kv head `h`, for the block (the pool's elements).
  uint8_t* kvBlockHead(uint8_t* pool_base, int64_t block, int64_t layer, int kv, int64_t h) const;
  // Token `t` of such a head as float32: the pool's own row (F32), or its codes times the scale
  // decoded into `scratch` (head_dim floats).
  const float* kvRow(const uint8_t* head, int64_t t, int64_t layer, int kv, float* scratch) const;
  // Stores the row (head_dim floats) as token `t` of the head.
  void putKvRow(uint8_t* head, int64_t t, int64_t layer, int kv, const float* row) const;

  HostStep step_;  // the step begun last
  AttentionExtras extras_;  // setAttentionExtras
  std::vector<int32_t> argmax_[2];  // argmaxRowsAsync results, by ticket parity
  uint64_t argmax_tickets_ = 0;     // results so far (the latest ticket is this - 1)
  ThreadPool pool_;
  std::vector<std::vector<float>> weights_;  // owned converted weights
  std::unordered_map<const void*, std::string> weight_names_;  // by data pointer, while an observer may ask
  ProductObserver observer_;
  uint64_t weight_bytes_ = 0;
  std::vector<std::vector<float>> scratch_;
  std::vector<float> linear_add_tmp_;  // linearAdd's product
  std::vector<float> quantized_out_tmp_;    // writeQuantized's float32 rows
  std::vector<float> fp8_x_, fp8_x_scale_;  // an 8-bit product's quantized x (FP8: code values) and row scales
  std::vector<int8_t> int8_x_;              // an INT8 product's quantized x
  KvPoolGeometry geometry_;
  std::vector<float> kv_scales_;  // setKvCacheScales
  int64_t secondary_blocks_ = 0;
  LazyBuffer primary_;
  LazyBuffer secondary_;
};

}  // namespace llmrt
