// CudaBackend::sampleRows: packs the rows' controls, penalty tokens and masked ids
// into one pinned buffer, uploads them with one copy, runs the sampling kernel
// (cuda_sampling.cu) and copies back one RowSample per row.
#include <cstring>

#include "backend/cuda/cuda_backend_impl.h"
#include "core/logging.h"

namespace llmrt {
namespace {

size_t alignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

Status CudaBackend::sampleRows(TensorView logits, std::span<const RowSampling> rows,
                               std::span<const PenaltyToken> penalties, std::span<const int32_t> masked,
                               std::span<RowSample> out) {
  if (failed()) return error_;
  const int64_t n = viewRows(logits), vocab = viewCols(logits);
  if (logits.dtype != DType::kF32 || logits.device != Device::kCuda)
    return invalidArgument("sampleRows: logits must be a float32 view of CUDA memory");
  if (static_cast<int64_t>(rows.size()) != n || out.size() != rows.size())
    return invalidArgument(strprintf("sampleRows: %lld logits rows, %zu row controls, %zu outputs",
                                     static_cast<long long>(n), rows.size(), out.size()));
  if (n == 0) return Status::ok();
  for (size_t r = 0; r < rows.size(); ++r) {
    const RowSampling& p = rows[r];
    const bool pen_ok = p.penalty_begin >= 0 && p.penalty_count >= 0 &&
                        static_cast<size_t>(p.penalty_begin) + static_cast<size_t>(p.penalty_count) <= penalties.size();
    const bool mask_ok = p.mask_begin >= 0 && p.mask_count >= 0 &&
                         static_cast<size_t>(p.mask_begin) + static_cast<size_t>(p.mask_count) <= masked.size();
    if (!pen_ok || !mask_ok)
      return invalidArgument(strprintf("sampleRows: row %zu's penalty or mask range lies outside the lists", r));
    if (!p.greedy && !(p.temperature > 0.0f && p.temperature < 3.4e38f))
      return invalidArgument(strprintf("sampleRows: row %zu: temperature %g", r, static_cast<double>(p.temperature)));
    if (p.num_logprobs > RowSample::kMaxTop)
      return invalidArgument(strprintf("sampleRows: row %zu: num_logprobs %d > %d", r, p.num_logprobs,
                                       RowSample::kMaxTop));
  }

  const size_t rows_bytes = rows.size() * sizeof(RowSampling);
  const size_t pen_off = alignUp(rows_bytes, 16);
  const size_t mask_off = alignUp(pen_off + penalties.size() * sizeof(PenaltyToken), 16);
  const size_t in_bytes = mask_off + masked.size() * sizeof(int32_t);
  const size_t out_bytes = rows.size() * sizeof(RowSample);
  LLMRT_RETURN_IF_ERROR(reservePinned(sample_in_host_, in_bytes));
  LLMRT_RETURN_IF_ERROR(reservePinned(sample_out_host_, out_bytes));
  if (!reserve(sample_in_, in_bytes, /*used_by_graphs=*/false) ||
      !reserve(sample_out_, out_bytes, /*used_by_graphs=*/false))
    return error_;
  // The last sampleRows finished with the pinned buffer: it synchronized before returning.
  char* host = static_cast<char*>(sample_in_host_.ptr);
  std::memcpy(host, rows.data(), rows_bytes);
  if (!penalties.empty()) std::memcpy(host + pen_off, penalties.data(), penalties.size() * sizeof(PenaltyToken));
  if (!masked.empty()) std::memcpy(host + mask_off, masked.data(), masked.size() * sizeof(int32_t));
  char* dev = static_cast<char*>(sample_in_.ptr);
  LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev, host, in_bytes, cudaMemcpyHostToDevice, stream_));
  {
    OpScope scope(this, [&] { return std::string("sample"); });
    LLMRT_CUDA_RETURN_IF_ERROR(cuda::sampleRows(static_cast<float*>(logits.data), viewRowStride(logits), n, vocab,
                                                reinterpret_cast<const RowSampling*>(dev),
                                                reinterpret_cast<const PenaltyToken*>(dev + pen_off),
                                                reinterpret_cast<const int32_t*>(dev + mask_off),
                                                static_cast<RowSample*>(sample_out_.ptr), stream_));
  }
  LLMRT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(sample_out_host_.ptr, sample_out_.ptr, out_bytes, cudaMemcpyDeviceToHost, stream_));
  LLMRT_RETURN_IF_ERROR(syncStepResults());
  collectProfile();
  std::memcpy(out.data(), sample_out_host_.ptr, out_bytes);
  return Status::ok();
}

}  // namespace llmrt
