// CudaBackend's collectives: on its stream through a CudaCommunicator of the same device.
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_communicator.h"

namespace llmrt {

Status CudaBackend::bindThread() {
  LLMRT_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  return Status::ok();
}

namespace {
// The communicator, when it can work on this backend's memory: a CUDA one on its device.
CudaCommunicator* onDevice(Communicator& comm, int device) {
  auto* c = dynamic_cast<CudaCommunicator*>(&comm);
  return c != nullptr && c->device() == device ? c : nullptr;
}
}  // namespace

// A failure while a step is being recorded (a buffer that had to grow) is no collective's error:
// recordOrReplay drops the record and runs the step op by op, collectives included, so the
// group must not be aborted for it. Any other failure is the backend's error.
Status CudaBackend::recordingFailed() const { return graphs_.recording() ? Status::ok() : error_; }

Status CudaBackend::allReduceSum(Communicator& comm, TensorView t) {
  CudaCommunicator* c = onDevice(comm, options_.device);
  if (c == nullptr) return Backend::allReduceSum(comm, t);
  if (failed()) return recordingFailed();
  if (t.dtype != DType::kF32 || viewRowStride(t) != viewCols(t))
    return invalidArgument("allReduceSum: a contiguous F32 view expected");
  Status st = c->allReduceSumAsync(static_cast<float*>(t.data), viewRows(t) * viewCols(t), stream_.get());
  if (!st.isOk()) fail(st);
  return st;
}

Status CudaBackend::allGatherColumns(Communicator& comm, const TensorView& local, TensorView out) {
  CudaCommunicator* c = onDevice(comm, options_.device);
  if (c == nullptr) return Backend::allGatherColumns(comm, local, out);
  if (failed()) return recordingFailed();
  const int64_t rows = viewRows(local), cols = viewCols(local);
  if (local.dtype != DType::kF32 || out.dtype != DType::kF32 || viewRowStride(local) != cols ||
      viewRows(out) != rows || viewCols(out) != cols * comm.size())
    return invalidArgument("allGatherColumns: F32 local [rows, c] (contiguous) and out [rows, ranks * c] expected");
  Status st = c->allGatherAsync(static_cast<const float*>(local.data), rows, cols, static_cast<float*>(out.data),
                                viewRowStride(out), stream_.get());
  if (!st.isOk()) fail(st);
  return st;
}

}  // namespace llmrt
