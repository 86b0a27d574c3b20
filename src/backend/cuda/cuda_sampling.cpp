// CudaBackend::sampleRows: packs the rows' controls, penalty tokens and masked ids
// into one pinned buffer, uploads them with one copy, runs the sampling kernel
// (cuda_sampling.cu) and copies back one RowSample per row.
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_backend_impl.h"
#include "core/logging.h"

namespace llmrt {
namespace {

size_t alignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

bool CudaBackend::samplesRows(std::span<const RowSampling> rows, int64_t vocab) const {
  if (!tuning().sampling) return false;
  if (static_cast<int64_t>(rows.size()) > kHostSamplingMaxTruncatingRows ||
      cuda::sampleGroupCtas(static_cast<int64_t>(rows.size()), group_capacity_) > 0)
    return true;
  const bool truncating = std::any_of(rows.begin(), rows.end(), [&](const RowSampling& r) {
    return !r.greedy && ((r.top_k > 0 && r.top_k < vocab) || r.top_p < 1.0f);
  });
  return !truncating ||
         (tuning().compact_sampling &&
          cuda::sampleCompactApplies(rows.data(), static_cast<int64_t>(rows.size()), vocab));
}

Status CudaBackend::sampleRows(TensorView logits, std::span<const RowSampling> rows,
                               std::span<const PenaltyToken> penalties, std::span<const int32_t> masked,
                               std::span<RowSample> out) {
  if (out.size() != rows.size())
    return invalidArgument(strprintf("sampleRows: %zu row controls, %zu outputs", rows.size(), out.size()));
  LLMRT_ASSIGN_OR_RETURN(uint64_t ticket, sampleRowsAsync(logits, rows, penalties, masked));
  return waitSamples(ticket, out);
}

Result<uint64_t> CudaBackend::sampleRowsAsync(TensorView logits, std::span<const RowSampling> rows,
                                              std::span<const PenaltyToken> penalties,
                                              std::span<const int32_t> masked) {
  if (failed()) return error_;
  if (graphs_.recording()) return internalError("sampleRowsAsync while a step is being recorded");
  const int64_t n = viewRows(logits), vocab = viewCols(logits);
  if (logits.dtype != DType::kF32 || logits.device != Device::kCuda)
    return invalidArgument("sampleRows: logits must be a float32 view of CUDA memory");
  if (static_cast<int64_t>(rows.size()) != n)
    return invalidArgument(strprintf("sampleRows: %lld logits rows, %zu row controls", static_cast<long long>(n),
                                     rows.size()));
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
  // Pending tokens are read from the latest result, as fed tokens are.
  cuda::ResultTokens pending;
  int32_t max_pending = -1;
  for (const RowSampling& p : rows) max_pending = std::max(max_pending, p.pending_src);
  if (max_pending >= 0) {
    LLMRT_ASSIGN_OR_RETURN(pending, results_.latestTokens(max_pending, "sampleRows (pending tokens)"));
  }

  // Slot `slot` was last used two results ago, which its caller has waited for: its pinned
  // buffers are free (the other slot's may still be read by a step in flight).
  const int slot = results_.next();
  ResultSlots::Slot& res = results_.slot(slot);
  const size_t rows_bytes = rows.size() * sizeof(RowSampling);
  const size_t pen_off = alignUp(rows_bytes, 16);
  const size_t mask_off = alignUp(pen_off + penalties.size() * sizeof(PenaltyToken), 16);
  const size_t in_bytes = std::max<size_t>(mask_off + masked.size() * sizeof(int32_t), 16);
  const size_t out_bytes = std::max<size_t>(rows.size(), 1) * sizeof(RowSample);
  LLMRT_RETURN_IF_ERROR(res.sample_in_host.reserve(in_bytes, stream_.get()));
  LLMRT_RETURN_IF_ERROR(res.sample_out_host.reserve(out_bytes, stream_.get()));
  if (!reserve(sample_in_, in_bytes, /*used_by_graphs=*/false) ||
      !reserve(res.sample_out, out_bytes, /*used_by_graphs=*/false))
    return error_;
  // A few rows (up to 16), each with a small top-k and no logprobs: the compact pass; other steps
  // of a few rows: the row-group kernel; else one CTA per row.
  const bool compact = tuning().compact_sampling && cuda::sampleCompactApplies(rows.data(), n, vocab);
  const int group_ctas = compact ? 0 : cuda::sampleGroupCtas(n, group_capacity_);
  if (compact && !reserve(sample_compact_, cuda::sampleCompactBytes(n), /*used_by_graphs=*/false)) return error_;
  if (group_ctas > 0 &&
      !reserve(sample_group_, cuda::sampleGroupBytes(n, group_ctas), /*used_by_graphs=*/false))
    return error_;
  if (n > 0) {
    char* host = static_cast<char*>(res.sample_in_host.get());
    std::memcpy(host, rows.data(), rows_bytes);
    if (!penalties.empty()) std::memcpy(host + pen_off, penalties.data(), penalties.size() * sizeof(PenaltyToken));
    if (!masked.empty()) std::memcpy(host + mask_off, masked.data(), masked.size() * sizeof(int32_t));
    // (sample_in_ is read by the previous result's kernel before this copy: stream order.)
    char* dev = static_cast<char*>(sample_in_.get());
    LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev, host, in_bytes, cudaMemcpyHostToDevice, stream_.get()));
    {
      OpScope scope(this, [&] { return std::string("sample"); });
      bool refused = false;
      LLMRT_CUDA_RETURN_IF_ERROR(cuda::sampleRows(static_cast<float*>(logits.data), viewRowStride(logits), n, vocab,
                                                  reinterpret_cast<const RowSampling*>(dev),
                                                  reinterpret_cast<const PenaltyToken*>(dev + pen_off),
                                                  reinterpret_cast<const int32_t*>(dev + mask_off), pending,
                                                  static_cast<RowSample*>(res.sample_out.get()),
                                                  compact ? sample_compact_.get() : nullptr, group_ctas,
                                                  sample_group_.get(), &refused, stream_.get()));
      if (refused) {  // not now, not later: few-row steps go back to the host rule (samplesRows)
        LLMRT_LOG_WARNING("CUDA backend: the row-group sampling kernel's cooperative launch was refused; turning it off");
        group_capacity_ = 0;
      }
    }
    LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(res.sample_out_host.get(), res.sample_out.get(),
                                               rows.size() * sizeof(RowSample), cudaMemcpyDeviceToHost,
                                               stream_.get()));
  }
  return publishResult(slot, n, true);
}

Status CudaBackend::waitSamples(uint64_t ticket, std::span<RowSample> out) {
  LLMRT_ASSIGN_OR_RETURN(int slot, waitResult(ticket, true));
  const ResultSlots::Slot& res = results_.slot(slot);
  if (static_cast<int64_t>(out.size()) != res.rows)
    return invalidArgument(
        strprintf("waitSamples: %zu outputs for %lld rows", out.size(), static_cast<long long>(res.rows)));
  if (!out.empty()) std::memcpy(out.data(), res.sample_out_host.get(), out.size() * sizeof(RowSample));
  return Status::ok();
}

}  // namespace llmrt
