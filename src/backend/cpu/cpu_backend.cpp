// CpuBackend: memory, weights and the KV cache pools. Ops are in cpu_ops.cpp
// and cpu_attention.cpp.
#include "backend/cpu/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <cblas.h>

#include "backend/step.h"
#include "backend/weight_parts.h"
#include "core/fp8.h"
#include "core/logging.h"

namespace llmrt {

CpuBackend::LazyBuffer::~LazyBuffer() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

Status CpuBackend::LazyBuffer::allocate(size_t bytes) {
  if (data_ != nullptr) munmap(data_, bytes_);
  data_ = nullptr;
  bytes_ = bytes;
  if (bytes_ == 0) return Status::ok();
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    const size_t want = bytes_;
    bytes_ = 0;
    return resourceExhausted("cannot reserve " + formatBytes(want) + " for a KV cache pool");
  }
  data_ = static_cast<uint8_t*>(p);
  return Status::ok();
}

CpuBackend::CpuBackend(int num_threads) : pool_(num_threads) {
  // OpenBLAS starts its own pool (as many threads as cores) unless told otherwise: hold it to
  // the same count, so num_threads bounds every thread the backend computes on. The setting is
  // process-wide; the last backend created wins.
  openblas_set_num_threads(pool_.numThreads());
}
CpuBackend::~CpuBackend() = default;

uint64_t CpuBackend::totalMemoryBytes() const {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

uint64_t CpuBackend::freeMemoryBytes() const {
  // MemAvailable is what the kernel could give us without swapping.
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  std::string unit;
  while (in >> key >> value >> unit) {
    if (key == "MemAvailable:") return value * 1024;
  }
  return totalMemoryBytes() / 2;
}

Result<TensorView> CpuBackend::loadWeight(std::span<const TensorView> parts, const std::string& name,
                                          bool borrowable) {
  LLMRT_ASSIGN_OR_RETURN(Shape shape, fusedWeightShape(parts, name));
  // A single F32, contiguous, float-aligned part needs no copy.
  if (borrowable && parts.size() == 1 && parts[0].dtype == DType::kF32 && parts[0].isContiguous() &&
      reinterpret_cast<uintptr_t>(parts[0].data) % alignof(float) == 0) {
    weight_bytes_ += parts[0].nbytes();
    weight_names_[parts[0].data] = name;
    return TensorView(parts[0].data, DType::kF32, shape);
  }
  std::vector<float> buf(static_cast<size_t>(shape.numel()));
  size_t at = 0;
  for (const TensorView& p : parts) {
    const size_t n = static_cast<size_t>(p.numel());
    convertToF32(p.data, p.dtype, buf.data() + at, n);  // handles unaligned mmap data
    at += n;
  }
  weight_bytes_ += buf.size() * sizeof(float);
  weights_.push_back(std::move(buf));
  weight_names_[weights_.back().data()] = name;
  return TensorView(weights_.back().data(), DType::kF32, shape);
}

Result<TensorView> CpuBackend::loadQuantizedWeight(const TensorView& codes, const TensorView& scales,
                                                   const std::string& name) {
  LLMRT_RETURN_IF_ERROR(checkQuantizedWeightParts(codes, scales, name));
  const int64_t n = codes.shape[0], k = codes.shape[1];
  // FP8: code values as floats; INT8: the code bytes, padded to a whole float.
  const int64_t code_floats = codes.dtype == DType::kI8 ? (n * k + 3) / 4 : n * k;
  std::vector<float> buf(static_cast<size_t>(code_floats + n));
  if (codes.dtype == DType::kI8)
    std::memcpy(buf.data(), codes.data, static_cast<size_t>(n * k));
  else
    convertToF32(codes.data, DType::kF8E4M3, buf.data(), static_cast<size_t>(n * k));
  std::memcpy(buf.data() + code_floats, scales.data, static_cast<size_t>(n) * sizeof(float));
  weight_bytes_ += buf.size() * sizeof(float);
  weights_.push_back(std::move(buf));
  weight_names_[weights_.back().data()] = name;
  return TensorView(weights_.back().data(), codes.dtype, codes.shape);
}

TensorView CpuBackend::scratch(int slot, int64_t rows, int64_t cols, DType dtype) {
  // F32 (activationDtype), or row-quantized codes and their scales (rowQuantizedScales).
  if (dtype != DType::kF32 && !isRowQuantized(dtype)) return TensorView(nullptr, dtype, Shape{rows, cols});
  if (slot >= static_cast<int>(scratch_.size())) scratch_.resize(static_cast<size_t>(slot) + 1);
  auto& buf = scratch_[static_cast<size_t>(slot)];
  const size_t need =
      dtype == DType::kF32
          ? static_cast<size_t>(rows * cols)
          : static_cast<size_t>(rowQuantizedScalesOffset(rows, cols) / 4 + std::max<int64_t>(rows, 1));
  if (buf.size() < need) buf.resize(need);
  return TensorView(buf.data(), dtype, Shape{rows, cols});
}

namespace {
int64_t viewRows(const TensorView& t) { return t.shape.rank() >= 2 ? t.shape[0] : 1; }
int64_t viewCols(const TensorView& t) { return t.shape.rank() >= 1 ? t.shape[t.shape.rank() - 1] : 1; }
int64_t viewRowStride(const TensorView& t) { return t.shape.rank() >= 2 ? t.strides[0] : viewCols(t); }
}  // namespace

Status CpuBackend::copyToHost(const TensorView& src, float* dst) {
  if (src.dtype != DType::kF32) return invalidArgument("copyToHost: only F32 views are supported");
  const int64_t r = viewRows(src), c = viewCols(src), ld = viewRowStride(src);
  for (int64_t i = 0; i < r; ++i)
    std::memcpy(dst + i * c, src.as<const float>() + i * ld, static_cast<size_t>(c) * sizeof(float));
  return Status::ok();
}

Status CpuBackend::copyFromHost(const float* src, TensorView dst) {
  if (dst.dtype != DType::kF32) return invalidArgument("copyFromHost: only F32 views are supported");
  const int64_t r = viewRows(dst), c = viewCols(dst), ld = viewRowStride(dst);
  for (int64_t i = 0; i < r; ++i)
    std::memcpy(dst.as<float>() + i * ld, src + i * c, static_cast<size_t>(c) * sizeof(float));
  return Status::ok();
}

Status CpuBackend::readKvBlock(KvPool pool, int32_t block, float* dst) {
  const bool primary = pool == KvPool::kPrimary;
  const int64_t n = primary ? geometry_.num_blocks : secondary_blocks_;
  if (block < 0 || block >= n) return outOfRange("readKvBlock: block " + std::to_string(block) + " out of range");
  uint8_t* base = primary ? primary_.data() : secondary_.data();
  const int64_t tpb = geometry_.tokens_per_block, hd = geometry_.head_dim;
  for (int64_t layer = 0; layer < geometry_.num_layers; ++layer)
    for (int kv = 0; kv < 2; ++kv)
      for (int64_t h = 0; h < geometry_.num_kv_heads; ++h) {
        const uint8_t* head = kvBlockHead(base, block, layer, kv, h);
        for (int64_t t = 0; t < tpb; ++t, dst += hd) {
          const float* row = kvRow(head, t, layer, kv, dst);
          if (row != dst) std::memcpy(dst, row, static_cast<size_t>(hd) * sizeof(float));
        }
      }
  return Status::ok();
}

Status CpuBackend::setKvCacheScales(std::span<const float> scales) {
  LLMRT_RETURN_IF_ERROR(checkKvCacheScales(scales));
  kv_scales_.assign(scales.begin(), scales.end());
  return Status::ok();
}

Status CpuBackend::allocateKvPools(const KvPoolGeometry& g, int64_t secondary_blocks) {
  if (g.dtype != DType::kF32 && g.dtype != DType::kF8E4M3)
    return unimplemented("CPU backend stores the KV cache in F32 or F8_E4M3 only");
  if (g.num_blocks <= 0 || g.num_layers <= 0 || g.num_kv_heads <= 0 || g.head_dim <= 0 || g.tokens_per_block <= 0)
    return invalidArgument("allocateKvPools: every pool dimension must be positive");
  geometry_ = g;
  secondary_blocks_ = secondary_blocks;
  const size_t per_block = g.bytesPerBlock();
  LLMRT_RETURN_IF_ERROR(primary_.allocate(per_block * static_cast<size_t>(g.num_blocks)));
  LLMRT_RETURN_IF_ERROR(secondary_.allocate(per_block * static_cast<size_t>(secondary_blocks)));
  return Status::ok();
}

uint8_t* CpuBackend::kvBlockHead(uint8_t* base, int64_t block, int64_t layer, int kv, int64_t h) const {
  const int64_t head_elems = geometry_.tokens_per_block * geometry_.head_dim;
  const int64_t at =
      block * geometry_.elementsPerBlock() + ((layer * 2 + kv) * geometry_.num_kv_heads + h) * head_elems;
  return base + static_cast<size_t>(at) * dtypeSize(geometry_.dtype);
}

const float* CpuBackend::kvRow(const uint8_t* head, int64_t t, int64_t layer, int kv, float* scratch) const {
  const int64_t hd = geometry_.head_dim;
  if (geometry_.dtype == DType::kF32) return reinterpret_cast<const float*>(head) + t * hd;
  const uint8_t* codes = head + t * hd;
  const float scale = kvCacheScale(kv_scales_, layer, kv);
  const float* value = f8e4m3Values();
  for (int64_t d = 0; d < hd; ++d) scratch[d] = value[codes[d]] * scale;
  return scratch;
}

void CpuBackend::putKvRow(uint8_t* head, int64_t t, int64_t layer, int kv, const float* row) const {
  const int64_t hd = geometry_.head_dim;
  if (geometry_.dtype == DType::kF32) {
    std::memcpy(reinterpret_cast<float*>(head) + t * hd, row, static_cast<size_t>(hd) * sizeof(float));
    return;
  }
  const Fp8KvScale s = Fp8KvScale::of(kvCacheScale(kv_scales_, layer, kv));
  for (int64_t d = 0; d < hd; ++d) head[t * hd + d] = fp8KvCode(row[d], s.inverse);
}

Status CpuBackend::copyKvBlocks(std::span<const KvBlockCopy> copies) {
  const size_t per_block = geometry_.bytesPerBlock();
  for (const KvBlockCopy& c : copies) {
    auto pool = [&](KvPool k) -> std::pair<uint8_t*, int64_t> {
      return k == KvPool::kPrimary ? std::pair{primary_.data(), geometry_.num_blocks}
                                       : std::pair{secondary_.data(), secondary_blocks_};
    };
    auto [src, src_n] = pool(c.src_pool);
    auto [dst, dst_n] = pool(c.dst_pool);
    if (c.src_block < 0 || c.src_block >= src_n || c.dst_block < 0 || c.dst_block >= dst_n)
      return outOfRange("copyKvBlocks: block id out of range (src " + std::to_string(c.src_block) + ", dst " +
                        std::to_string(c.dst_block) + ")");
    if (c.num_tokens < 0 || c.num_tokens >= geometry_.tokens_per_block) {
      std::memcpy(dst + c.dst_block * per_block, src + c.src_block * per_block, per_block);
      continue;
    }
    const size_t n = static_cast<size_t>(c.num_tokens * geometry_.head_dim) * dtypeSize(geometry_.dtype);
    for (int64_t layer = 0; layer < geometry_.num_layers; ++layer)
      for (int kv = 0; kv < 2; ++kv)
        for (int64_t h = 0; h < geometry_.num_kv_heads; ++h)
          std::memcpy(kvBlockHead(dst, c.dst_block, layer, kv, h), kvBlockHead(src, c.src_block, layer, kv, h), n);
  }
  return Status::ok();
}

}  // namespace llmrt
