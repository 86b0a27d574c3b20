// CudaBackend ops that only some architectures use, host side: argument checks and the launches
// of cuda_arch_ops.cu's kernels (LayerNorm, activations, position embeddings, residual adds,
// scaling and soft-capping, the shared expert's sigmoid-gated add), and setAttentionExtras, which
// the attention kernels read (cuda_backend_ops.cpp). The mixture-of-experts op is in
// cuda_backend_moe.cpp.
#include <cmath>
#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "core/logging.h"

namespace llmrt {
namespace {

float* f32(const TensorView& t) { return static_cast<float*>(t.data); }

const char* actName(Activation a) {
  switch (a) {
    case Activation::kSilu:
      return "silu";
    case Activation::kGelu:
      return "gelu";
    case Activation::kGeluTanh:
      return "gelu_tanh";
    case Activation::kRelu:
      return "relu";
  }
  return "?";
}

}  // namespace

void CudaBackend::layerNorm(const TensorView& x, const TensorView& weight, const TensorView* bias, float eps,
                            TensorView out) {
  if (failed()) return;
  OpScope scope(this, [&] { return std::string("layerNorm"); });
  if (!checkDtypes("layerNorm", x, DType::kF32) || !checkDtypes("layerNorm weight", weight, DType::kF32) ||
      (bias != nullptr && !checkDtypes("layerNorm bias", *bias, DType::kF32)) ||
      !checkActivation("layerNorm out", out))
    return;
  LLMRT_CUDA_OP_CHECK(cuda::layerNorm(f32(x), viewRowStride(x), f32(weight),
                                      bias != nullptr ? f32(*bias) : nullptr, eps, viewRows(x), viewCols(x),
                                      out.data, out.dtype, viewRowStride(out), stream_.get()));
}

void CudaBackend::activation(Activation act, const TensorView& x, TensorView out) {
  if (failed()) return;
  OpScope scope(this, [&] { return std::string("activation ") + actName(act); });
  if (!checkActivation("activation in", x)) return;
  if (isRowQuantized(out.dtype)) {
    writeQuantized(
        "activation", out, [] { return cudaErrorNotSupported; },
        [&](void* tmp) {
          return cuda::activation(toCudaAct(act), x.data, x.dtype, viewRowStride(x), viewRows(out),
                                  viewCols(out), tmp, activation_dtype_, viewRowStride(out), stream_.get());
        });
    return;
  }
  if (!checkActivation("activation out", out)) return;
  LLMRT_CUDA_OP_CHECK(cuda::activation(toCudaAct(act), x.data, x.dtype, viewRowStride(x), viewRows(out),
                                       viewCols(out), out.data, out.dtype, viewRowStride(out),
                                       stream_.get()));
}

void CudaBackend::linearActivation(Activation act, const TensorView& x, const TensorView& w,
                                   const TensorView* bias, TensorView tmp, TensorView out) {
  if (failed()) return;
  const int64_t m = viewRows(x), k = viewCols(x), n = w.shape[0];
  const bool half_w = w.dtype == DType::kBF16 || w.dtype == DType::kF16;
  const bool fuse = tuning().act_fusion && tuning().gemv && half_w && m >= 1 && m <= tuning().gemv_rows &&
                    w.shape[1] == k && viewCols(out) == n && viewRows(out) == m && tmp.dtype == out.dtype &&
                    (out.dtype == DType::kF32 || out.dtype == w.dtype) &&
                    (x.dtype == DType::kF32 || x.dtype == w.dtype) &&
                    cuda::gemvSupported(x.data, x.dtype, viewRowStride(x), m, k);
  if (!fuse) {
    Backend::linearActivation(act, x, w, bias, tmp, out);
    return;
  }
  OpScope scope(this, [&] {
    return strprintf("linear+%s gemv m=%lld n=%lld k=%lld", actName(act), static_cast<long long>(m),
                     static_cast<long long>(n), static_cast<long long>(k));
  });
  if (!checkActivation("linear x", x) || !checkActivation("linear out", out)) return;
  LLMRT_CUDA_OP_CHECK(cuda::gemv(x.data, x.dtype, viewRowStride(x), w.data, w.dtype, m, k, n,
                                 bias != nullptr ? f32(*bias) : nullptr, out.data, out.dtype,
                                 viewRowStride(out), false, stream_.get(), nullptr, nullptr, toCudaAct(act)));
}

void CudaBackend::gatedActivation(Activation act, const TensorView& gate_up, TensorView out) {
  if (failed()) return;
  OpScope scope(this, [&] { return std::string("gatedActivation ") + actName(act); });
  if (!checkActivation("gatedActivation in", gate_up)) return;
  if (isRowQuantized(out.dtype)) {
    writeQuantized(
        "gatedActivation", out, [] { return cudaErrorNotSupported; },
        [&](void* tmp) {
          return cuda::gatedActivation(toCudaAct(act), gate_up.data, gate_up.dtype, viewRowStride(gate_up),
                                       viewRows(out), viewCols(out), tmp, activation_dtype_,
                                       viewRowStride(out), stream_.get());
        });
    return;
  }
  if (!checkActivation("gatedActivation out", out)) return;
  LLMRT_CUDA_OP_CHECK(cuda::gatedActivation(toCudaAct(act), gate_up.data, gate_up.dtype, viewRowStride(gate_up),
                                            viewRows(out), viewCols(out), out.data, out.dtype,
                                            viewRowStride(out), stream_.get()));
}

void CudaBackend::addPositionEmbedding(const TensorView& table, TensorView x) {
  if (failed() || step_.host().token_ids.empty()) return;
  OpScope scope(this, [&] { return std::string("addPositionEmbedding"); });
  if (!checkActivation("addPositionEmbedding table", table) ||
      !checkDtypes("addPositionEmbedding x", x, DType::kF32))
    return;
  LLMRT_CUDA_OP_CHECK(cuda::addPositionEmbedding(table.data, table.dtype, viewCols(table),
                                                 step_.dev().positions, step_.host().numTokens(), f32(x),
                                                 viewRowStride(x), stream_.get()));
}

void CudaBackend::add(const TensorView& y, TensorView residual) {
  if (failed()) return;
  OpScope scope(this, [&] { return std::string("add"); });
  if (!checkActivation("add y", y) || !checkDtypes("add residual", residual, DType::kF32)) return;
  LLMRT_CUDA_OP_CHECK(cuda::addRows(y.data, y.dtype, viewRowStride(y), viewRows(residual), viewCols(residual),
                                    f32(residual), viewRowStride(residual), stream_.get()));
}

void CudaBackend::scaleSoftcap(TensorView x, float scale, float cap) {
  if (failed()) return;
  OpScope scope(this, [&] { return std::string("scaleSoftcap"); });
  if (!checkDtypes("scaleSoftcap", x, DType::kF32)) return;
  LLMRT_CUDA_OP_CHECK(
      cuda::scaleSoftcap(f32(x), viewRowStride(x), viewRows(x), viewCols(x), scale, cap, stream_.get()));
}

Status CudaBackend::setAttentionExtras(const AttentionExtras& extras) {
  if (failed()) return error_;
  if (graphs_.recording()) return internalError("setAttentionExtras while a step is being recorded");
  if (!(extras.logit_softcap >= 0.0f) || !std::isfinite(extras.logit_softcap))
    return invalidArgument("setAttentionExtras: logit_softcap " + strprintf("%g", extras.logit_softcap) +
                           " must be a finite number >= 0");
  for (float s : extras.alibi_slopes)
    if (!std::isfinite(s)) return invalidArgument("setAttentionExtras: ALiBi slopes must be finite");
  cuda::AttnExtras dev;
  dev.softcap = extras.logit_softcap;
  if (!extras.alibi_slopes.empty()) {
    const size_t bytes = extras.alibi_slopes.size() * sizeof(float);
    if (!reserve(alibi_, bytes)) return error_;
    // (In stream order: kernels still in flight read the old slopes first.)
    LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(alibi_.get(), extras.alibi_slopes.data(), bytes,
                                               cudaMemcpyHostToDevice, stream_.get()));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));  // the host's vector may go
    dev.alibi = static_cast<const float*>(alibi_.get());
  }
  extras_ = extras;
  attn_extras_ = dev;
  graphs_.invalidate();  // recorded steps launched their kernels with the old extras
  return Status::ok();
}

void CudaBackend::sigmoidGatedAdd(const TensorView& y, const TensorView& gate, TensorView residual) {
  if (failed()) return;
  OpScope scope(this, [&] { return std::string("sigmoidGatedAdd"); });
  if (!checkActivation("sigmoidGatedAdd y", y) || !checkDtypes("sigmoidGatedAdd gate", gate, DType::kF32) ||
      !checkDtypes("sigmoidGatedAdd residual", residual, DType::kF32))
    return;
  const int64_t rows = viewRows(residual), cols = viewCols(residual);
  if (viewRows(y) != rows || viewCols(y) != cols || viewRows(gate) != rows || viewCols(gate) != 1) {
    fail(invalidArgument("sigmoidGatedAdd: y [" + std::to_string(viewRows(y)) + ", " + std::to_string(viewCols(y)) +
                         "] and gate [" + std::to_string(viewRows(gate)) + ", " + std::to_string(viewCols(gate)) +
                         "] for a residual [" + std::to_string(rows) + ", " + std::to_string(cols) +
                         "]; expected y of the residual's shape and gate [rows, 1]"));
    return;
  }
  LLMRT_CUDA_OP_CHECK(cuda::sigmoidGatedAdd(y.data, y.dtype, viewRowStride(y), f32(gate), viewRowStride(gate), rows,
                                            cols, f32(residual), viewRowStride(residual), stream_.get()));
}

}  // namespace llmrt
