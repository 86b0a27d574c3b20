// The CUDA backend's factory. This header includes no CUDA headers: the
// runtime includes it, and only src/backend/cuda compiles against CUDA.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/comm/communicator.h"
#include "core/dtype.h"
#include "llmrt/engine_config.h"
#include "llmrt/status.h"

namespace llmrt {

struct CudaBackendOptions {
  int device = 0;
  // Dtype of matrix weights (linear layers, embedding tables) on the device:
  // kBF16 (default; fp32 checkpoints are rounded to bf16, matrix products run
  // bf16 x bf16 with fp32 accumulation), kF16 (the same in fp16: 8x finer rounding of
  // the products' inputs and the cache, but values beyond 65504 overflow) or kF32 (fp32
  // products, no TF32: the mode that agrees with the CPU backend to float32 rounding).
  // Vectors (norm weights, biases) are always kept in float32.
  DType weight_dtype = DType::kBF16;
  // KV cache dtype the backend asks the engine for (kBF16, kF16 or kF32); kF32 when
  // weight_dtype is kF32. With 16-bit weights the cache's type may differ from theirs; a kF32
  // cache keeps the activations in float32 as well (the accurate mode).
  DType kv_dtype = DType::kBF16;
  // Switches for measurements and diagnosis (llmrt/engine_config.h); the defaults are the fast paths.
  CudaTuning tuning;
};

// Number of CUDA devices visible to this process; 0 when there is no driver or device.
int cudaDeviceCount();

// Creates a CUDA backend on `options.device`. Fails with kFailedPrecondition
// ("no CUDA device found") when none is visible, kInvalidArgument on bad options.
Result<std::unique_ptr<Backend>> createCudaBackend(const CudaBackendOptions& options);

// The communicators of a group of CUDA ranks (cuda_communicator.h), index = rank, rank r on
// devices[r] (ranks may share a device: tests on one GPU). custom_all_reduce on: the custom
// kernels for messages up to 8 MiB, NCCL beyond; off: NCCL for every message (needs
// libnccl.so.2 and one device per rank). Without NCCL, or with ranks sharing a device, the custom
// kernels serve every size. The GPUs need peer access to each other; at most 8 ranks.
// staging_floats: each rank's two staging buffers, in floats.
struct CudaGroupOptions {
  std::vector<int> devices;
  bool custom_all_reduce = true;
  int64_t staging_floats = int64_t{4} << 20;
};
Result<std::vector<std::unique_ptr<Communicator>>> makeCudaGroup(const CudaGroupOptions& options);

}  // namespace llmrt
