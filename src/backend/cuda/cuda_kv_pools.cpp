#include "backend/cuda/cuda_kv_pools.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_status.h"
#include "backend/step.h"
#include "core/logging.h"

namespace llmrt {

cuda::KvLayout kvLayout(const KvPoolGeometry& g) {
  return cuda::KvLayout{g.elementsPerBlock(), g.num_kv_heads, g.tokens_per_block, g.head_dim};
}

Status KvPools::init() {
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(copy_stream_.out(), cudaStreamNonBlocking));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(copies_ready_.out(), cudaEventDisableTiming));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(copies_done_.out(), cudaEventDisableTiming));
  return Status::ok();
}

uint64_t KvPools::primaryBytes() const {
  return geometry_.bytesPerBlock() * static_cast<uint64_t>(geometry_.num_blocks);
}

uint64_t KvPools::secondaryBytes() const {
  return geometry_.bytesPerBlock() * static_cast<uint64_t>(secondary_blocks_);
}

Status KvPools::check(const KvPoolGeometry& g, int64_t secondary_blocks) {
  if (g.dtype != DType::kF32 && g.dtype != DType::kBF16 && g.dtype != DType::kF16 && g.dtype != DType::kF8E4M3)
    return unimplemented("CUDA backend stores the KV cache in F32, BF16, F16 or F8_E4M3, not " +
                         std::string(dtypeName(g.dtype)));
  if (g.num_blocks <= 0 || g.num_layers <= 0 || g.num_kv_heads <= 0 || g.head_dim <= 0 ||
      g.tokens_per_block <= 0)
    return invalidArgument("allocateKvPools: every pool dimension must be positive");
  if (g.head_dim > 256) return unimplemented("CUDA attention supports head_dim <= 256");
  if (secondary_blocks < 0) return invalidArgument("allocateKvPools: secondary_blocks must be >= 0");
  return Status::ok();
}

Status KvPools::setScales(std::span<const float> scales) {
  LLMRT_RETURN_IF_ERROR(checkKvCacheScales(scales));
  scales_.assign(scales.begin(), scales.end());
  return Status::ok();
}

float KvPools::scale(int64_t layer, int kv) const {
  return geometry_.dtype == DType::kF8E4M3 ? kvCacheScale(scales_, layer, kv) : 1.0f;
}

Status KvPools::waitCopies() const {
  if (copy_stream_) LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy_stream_.get()));
  return Status::ok();
}

Status KvPools::reallocate(const KvPoolGeometry& g, int64_t secondary_blocks, cudaStream_t stream) {
  LLMRT_CUDA_RETURN_IF_ERROR(cudaFree(primary_.release()));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaFreeHost(secondary_.release()));
  geometry_ = KvPoolGeometry{};
  const size_t primary_bytes = g.bytesPerBlock() * static_cast<size_t>(g.num_blocks);
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMalloc(primary_.out(), primary_bytes));
  // Unwritten slots are never read (attention stops at kv_len), but zeroed pools keep
  // whole-block copies and tests deterministic.
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(primary_.get(), 0, primary_bytes, stream));
  if (secondary_blocks > 0) {
    const size_t bytes = g.bytesPerBlock() * static_cast<size_t>(secondary_blocks);
    LLMRT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(secondary_.out(), bytes, cudaHostAllocPortable));
    std::memset(secondary_.get(), 0, bytes);
  }
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return Status::ok();
}

void KvPools::commit(const KvPoolGeometry& g, int64_t secondary_blocks) {
  geometry_ = g;
  secondary_blocks_ = secondary_blocks;
  LLMRT_LOG_INFO("CUDA KV pools: primary %s on the device, secondary %s pinned on the host",
                 formatBytes(primaryBytes()).c_str(), formatBytes(secondaryBytes()).c_str());
}

Status KvPools::copyBlocks(std::span<const KvBlockCopy> copies, cudaStream_t stream) {
  const size_t block_bytes = geometry_.bytesPerBlock();
  const size_t esz = dtypeSize(geometry_.dtype);
  // Offload / onboard copies go on the copy stream: after everything the compute stream has
  // enqueued (writes into the source blocks, reads of the destinations), and before anything it
  // enqueues next. Copies between primary blocks only (partial reuse) stay on the compute stream.
  auto pool = [&](KvPool k) -> std::pair<uint8_t*, int64_t> {
    return k == KvPool::kPrimary ? std::pair{static_cast<uint8_t*>(primary_.get()), geometry_.num_blocks}
                                 : std::pair{static_cast<uint8_t*>(secondary_.get()), secondary_blocks_};
  };
  bool touches_host = false;
  for (const KvBlockCopy& c : copies) {  // check them all before enqueuing any
    if (c.src_block < 0 || c.src_block >= pool(c.src_pool).second || c.dst_block < 0 ||
        c.dst_block >= pool(c.dst_pool).second)
      return outOfRange("copyKvBlocks: block id out of range (src " + std::to_string(c.src_block) + ", dst " +
                        std::to_string(c.dst_block) + ")");
    touches_host |= c.src_pool == KvPool::kSecondary || c.dst_pool == KvPool::kSecondary;
  }
  cudaStream_t s_copy = stream;
  if (touches_host) {
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(copies_ready_.get(), stream));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy_stream_.get(), copies_ready_.get(), 0));
    s_copy = copy_stream_.get();
  }
  for (const KvBlockCopy& c : copies) {
    uint8_t* src = pool(c.src_pool).first;
    uint8_t* dst = pool(c.dst_pool).first;
    uint8_t* s = src + static_cast<size_t>(c.src_block) * block_bytes;
    uint8_t* d = dst + static_cast<size_t>(c.dst_block) * block_bytes;
    // cudaMemcpyDefault: unified addressing tells device memory from pinned host memory.
    if (c.num_tokens < 0 || c.num_tokens >= geometry_.tokens_per_block) {
      LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d, s, block_bytes, cudaMemcpyDefault, s_copy));
      continue;
    }
    // The first num_tokens slots of every (layer, K/V, head) row of the block: one 2-D copy.
    const size_t pitch = static_cast<size_t>(geometry_.tokens_per_block * geometry_.head_dim) * esz;
    const size_t width = static_cast<size_t>(c.num_tokens * geometry_.head_dim) * esz;
    const size_t height = static_cast<size_t>(geometry_.num_layers * 2 * geometry_.num_kv_heads);
    if (width == 0) continue;
    LLMRT_CUDA_RETURN_IF_ERROR(
        cudaMemcpy2DAsync(d, pitch, s, pitch, width, height, cudaMemcpyDefault, s_copy));
  }
  if (touches_host) {
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(copies_done_.get(), copy_stream_.get()));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, copies_done_.get(), 0));
  }
  return Status::ok();
}

Status KvPools::readBlock(KvPool pool, int32_t block, float* dst, cudaStream_t stream) const {
  const bool primary = pool == KvPool::kPrimary;
  const int64_t n = primary ? geometry_.num_blocks : secondary_blocks_;
  if (block < 0 || block >= n)
    return outOfRange("readKvBlock: block " + std::to_string(block) + " out of range");
  const size_t bytes = geometry_.bytesPerBlock();
  std::vector<uint8_t> raw(bytes);
  const uint8_t* base = static_cast<const uint8_t*>(primary ? primary_.get() : secondary_.get());
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(raw.data(), base + static_cast<size_t>(block) * bytes, bytes,
                                             cudaMemcpyDefault, stream));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  convertToF32(raw.data(), geometry_.dtype, dst, static_cast<size_t>(geometry_.elementsPerBlock()));
  if (geometry_.dtype != DType::kF8E4M3) return Status::ok();
  const int64_t head_elems = geometry_.tokens_per_block * geometry_.head_dim;
  for (int64_t layer = 0; layer < geometry_.num_layers; ++layer)
    for (int kv = 0; kv < 2; ++kv) {
      const float s = scale(layer, kv);
      for (int64_t i = 0; i < geometry_.num_kv_heads * head_elems; ++i) *dst++ *= s;
    }
  return Status::ok();
}

}  // namespace llmrt
