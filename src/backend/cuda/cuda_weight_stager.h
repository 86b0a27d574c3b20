// Weight uploads (Backend::loadWeight): each part goes up chunk by chunk through two pinned
// 32 MiB staging buffers used in turn, so one is filled on the host while the other's copy runs;
// each buffer has an event that says its last copy has read it. A checkpoint dtype that differs
// from the device's is uploaded raw into a device staging buffer and converted into place by a
// kernel (cuda::convertElements), which flags the first weight whose fp16 conversion overflowed
// for finish(). Everything here lives only while weights are loaded. Internal to src/backend/cuda.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/cuda_handles.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "llmrt/status.h"

namespace llmrt {

class WeightStager {
 public:
  // Copies part `p` (any dtype, host memory, maybe unaligned) into `dev` as `dt`, on `stream`;
  // a dtype change is made on the device, an fp16 overflow recorded under `name`.
  Status stage(const TensorView& p, DType dt, uint8_t* dev, const std::string& name, cudaStream_t stream);
  // Once the stream has been synchronised (every weight is on the device): frees the staging
  // memory and names the first weight whose values did not fit float16 (InvalidArgument).
  Status finish();

 private:
  static constexpr size_t kStagingBytes = size_t{32} << 20;
  PinnedMemory host_[2];
  CudaEvent staged_[2];  // the copy that last read host_[i] (and dev_[i]) is done
  int next_ = 0;
  DeviceMemory dev_[2];                       // raw chunks converted on the device (F32 / BF16 / F16)
  DeviceMemory first_bad_;                    // int32: lowest tag of a converted weight that overflowed
  std::vector<std::string> converted_names_;  // tag -> weight name, for finish()'s error
};

}  // namespace llmrt
