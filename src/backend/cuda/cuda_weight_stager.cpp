#include "backend/cuda/cuda_weight_stager.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_status.h"

namespace llmrt {

Status WeightStager::stage(const TensorView& p, DType dt, uint8_t* dev, const std::string& name,
                           cudaStream_t stream) {
  // What goes up: the checkpoint's bytes as they are when they are float32 / bf16 / fp16, other
  // dtypes widened to float32 on the host. When that differs from the weights' dtype, a kernel
  // converts it into place on the device (the host's one-thread loop took ~35 s for 8B parameters)
  // and flags a value beyond fp16's range for finish().
  const bool native = p.dtype == DType::kF32 || p.dtype == DType::kBF16 || p.dtype == DType::kF16 ||
                      ((p.dtype == DType::kF8E4M3 || p.dtype == DType::kI8) && dt == p.dtype);  // (8-bit codes go up as they are)
  const DType up = native ? p.dtype : DType::kF32;
  const bool convert = up != dt;
  for (int i = 0; i < 2; ++i) {
    if (!staged_[i])
      LLMRT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(staged_[i].out(), cudaEventDisableTiming));
    if (!host_[i])
      LLMRT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(host_[i].out(), kStagingBytes, cudaHostAllocDefault));
    if (convert && !dev_[i]) LLMRT_CUDA_RETURN_IF_ERROR(cudaMalloc(dev_[i].out(), kStagingBytes));
  }
  if (convert && !first_bad_) {
    LLMRT_CUDA_RETURN_IF_ERROR(cudaMalloc(first_bad_.out(), sizeof(int32_t)));
    LLMRT_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(first_bad_.get(), 0x7f, sizeof(int32_t), stream));  // > any tag
  }
  const int32_t tag = static_cast<int32_t>(converted_names_.size());
  if (convert) converted_names_.push_back(name);
  const size_t src_size = dtypeSize(p.dtype), up_size = dtypeSize(up), dst_size = dtypeSize(dt);
  const size_t n = static_cast<size_t>(p.numel());
  const size_t chunk = kStagingBytes / std::max(up_size, dst_size);  // elements per copy
  const uint8_t* src = static_cast<const uint8_t*>(p.data);
  for (size_t e0 = 0; e0 < n; e0 += chunk) {
    const size_t m = std::min(chunk, n - e0);
    void* buf = host_[next_].get();
    // The copy that last read this buffer must be done before it is refilled.
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staged_[next_].get()));
    if (native)
      std::memcpy(buf, src + e0 * src_size, m * up_size);
    else
      convertToF32(src + e0 * src_size, p.dtype, static_cast<float*>(buf), m);  // (reads unaligned data)
    if (!convert) {
      LLMRT_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(dev + e0 * dst_size, buf, m * dst_size, cudaMemcpyHostToDevice, stream));
    } else {
      // Up into the device buffer, then converted into place (stream-ordered: the buffer is free
      // again when the next chunk's copy into it runs).
      void* raw = dev_[next_].get();
      LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(raw, buf, m * up_size, cudaMemcpyHostToDevice, stream));
      LLMRT_CUDA_RETURN_IF_ERROR(cuda::convertElements(raw, up, dev + e0 * dst_size, dt,
                                                       static_cast<int64_t>(m), tag,
                                                       static_cast<int32_t*>(first_bad_.get()), stream));
    }
    LLMRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(staged_[next_].get(), stream));
    next_ ^= 1;
  }
  return Status::ok();
}

Status WeightStager::finish() {
  int32_t first_bad = INT32_MAX;
  if (first_bad_) {
    LLMRT_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(&first_bad, first_bad_.get(), sizeof(int32_t), cudaMemcpyDeviceToHost));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaFree(first_bad_.release()));
  }
  for (PinnedMemory& b : host_) LLMRT_CUDA_RETURN_IF_ERROR(cudaFreeHost(b.release()));
  for (DeviceMemory& b : dev_) LLMRT_CUDA_RETURN_IF_ERROR(cudaFree(b.release()));
  std::vector<std::string> names = std::move(converted_names_);
  converted_names_ = {};
  // bf16 / fp32 -> fp16 keeps every finite value up to 65504 (bf16's 8 significant bits fit in
  // fp16's 11 down to 2^-14; smaller ones lose bits as subnormals); beyond that a value turned
  // into infinity, so such a checkpoint needs bfloat16.
  if (first_bad >= 0 && static_cast<size_t>(first_bad) < names.size())
    return invalidArgument(
        "weight " + names[static_cast<size_t>(first_bad)] +
        " holds values beyond float16's range (65504): load the model with dtype \"bfloat16\"");
  return Status::ok();
}

}  // namespace llmrt
