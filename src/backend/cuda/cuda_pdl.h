// Programmatic dependent launch (Hopper): a kernel launched with launchPdl may
// start while the kernel before it on the stream is finishing, and blocks in
// pdlWait() until that kernel has completed and its writes are visible. So the
// launch latency and ramp-up of each small decode kernel hide behind the tail
// of the previous one, and a matrix-vector product can start pulling its
// weights into L2 before its input exists (cuda_gemv.cu).
//
// Rules for every kernel launched with launchPdl: call pdlWait() before reading
// anything an earlier kernel wrote and before writing anything (only reads of
// data no kernel writes, such as weights, may come first), then
// pdlLaunchDependents() to let the next kernel launch. Since each such kernel
// completes only after its own wait, all earlier kernels are complete once
// pdlWait() returns. Kernels launched the ordinary way are unaffected.
// Internal to src/backend/cuda.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace llmrt::cuda {

// On by default on devices of compute capability 9.0 and newer (set by the backend).
void setPdlEnabled(bool on);
bool pdlEnabled();

template <typename... Params, typename... Args>
cudaError_t launchPdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdlEnabled() ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

#ifdef __CUDACC__
__device__ __forceinline__ void pdlWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdlLaunchDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
#endif

}  // namespace llmrt::cuda
