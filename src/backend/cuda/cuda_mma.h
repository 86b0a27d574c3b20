// Device helpers shared by the tensor-core attention kernels (cuda_flash_attention.cu,
// cuda_decode_mma.cu): 16-byte cp.async copies into shared memory, ldmatrix, and
// mma.sync.m16n8k16 with bf16 or fp16 operands and fp32 accumulators. The fragment layouts are
// described once, at the top of cuda_flash_attention.cu. Internal to src/backend/cuda;
// include only from .cu files.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_vec.h"

namespace llmrt::cuda {

__device__ __forceinline__ uint32_t sharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy; with valid == false nothing is read and the
// 16 destination bytes are zero-filled (src-size 0).
__device__ __forceinline__ void cpAsync16(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
// The same for 8 bytes (through L1: cp.async.cg takes 16 only): an FP8 cache's 8 features.
__device__ __forceinline__ void cpAsync8(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 8 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrixX4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrixX4Trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// d += a * b (16x16 times 16x8, fp32 accumulate) with H = __nv_bfloat16 or __half operands.
template <typename H>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                        uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// mma16816 whose A rows 8..15 are zero: `a` holds A rows 0..7 (a[0], a[2] of the full fragment)
// and `d` their accumulators (d[0], d[1]). Rows 8..15 take a zero register and land in scratch
// outputs that are never read, so the caller keeps half the registers; rows 0..7 get the bits
// mma16816 gives them.
template <typename H>
__device__ __forceinline__ void mma16816Top(float (&d)[2], const uint32_t (&a)[2], uint32_t b0, uint32_t b1) {
  float scratch0, scratch1;
  if constexpr (std::is_same_v<H, __nv_bfloat16>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %6, %5, %6}, {%7, %8}, "
        "{%0, %1, %9, %9};\n"
        : "+f"(d[0]), "+f"(d[1]), "=f"(scratch0), "=f"(scratch1)
        : "r"(a[0]), "r"(a[1]), "r"(0u), "r"(b0), "r"(b1), "f"(0.0f));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %6, %5, %6}, {%7, %8}, "
        "{%0, %1, %9, %9};\n"
        : "+f"(d[0]), "+f"(d[1]), "=f"(scratch0), "=f"(scratch1)
        : "r"(a[0]), "r"(a[1]), "r"(0u), "r"(b0), "r"(b1), "f"(0.0f));
}

// Two floats rounded (nearest even) to H: `lo` in bits 0..15, `hi` in 16..31; and back.
template <typename H>
__device__ __forceinline__ uint32_t packPair(float lo, float hi) {
  return floatsToPair(lo, hi, static_cast<const H*>(nullptr));
}
template <typename H>
__device__ __forceinline__ float pairSum(uint32_t v) {
  const float2 f = pairToFloat2(v, static_cast<const H*>(nullptr));
  return f.x + f.y;
}

// A query pair (x, y) as H hi and lo parts: hi = H(x, y), lo = H of the exact fp32 remainders,
// so hi + lo carries ~16 (bf16) or ~22 (fp16) significant bits (see cuda_flash_attention.cu, step 3).
template <typename H>
__device__ __forceinline__ void splitPair(float x, float y, uint32_t& hi, uint32_t& lo) {
  hi = packPair<H>(x, y);
  const float2 h = pairToFloat2(hi, static_cast<const H*>(nullptr));
  lo = packPair<H>(x - h.x, y - h.y);
}

}  // namespace llmrt::cuda
