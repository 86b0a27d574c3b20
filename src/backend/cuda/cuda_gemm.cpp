#include "backend/cuda/cuda_gemm.h"

#include <utility>

namespace llmrt {

cublasStatus_t LtGemm::init() { return cublasLtCreate(lt_.out()); }

// Row-major out[m, n] = x W^T is column-major out^T[n, m] = W^T x^T with W stored column-major
// [k, n] (ld k) used transposed and x^T column-major [k, m] (ld ldx) (FP8 needs this "TN" form).
const LtGemm::Plan* LtGemm::plan(const Shape& shape, cublasStatus_t& s) {
  s = CUBLAS_STATUS_SUCCESS;
  auto it = plans_.find(shape);
  if (it != plans_.end()) return &it->second;
  if (plans_.size() > 4096) plans_.clear();  // many distinct batch sizes: start over
  const auto [m, n, k, ldc, ldx, in, out, ws, scaling] = shape;
  const auto in_type = static_cast<cudaDataType_t>(in), out_type = static_cast<cudaDataType_t>(out);
  size_t workspace_bytes = static_cast<size_t>(ws);
  Plan p;
  const bool int8 = in_type == CUDA_R_8I;  // int32 accumulation, alpha and beta int32
  s = cublasLtMatmulDescCreate(p.op.out(), int8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F,
                               int8 ? CUDA_R_32I : CUDA_R_32F);
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(p.op.get(), CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(p.op.get(), CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  if (scaling == 1) {
    const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulDescSetAttribute(p.op.get(), CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode));
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulDescSetAttribute(p.op.get(), CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode));
  }
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(p.a.out(), in_type, k, n, k);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(p.b.out(), in_type, k, m, ldx);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(p.c.out(), out_type, n, m, ldc);
  cublasLtMatmulPreference_t pref = nullptr;
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceCreate(&pref);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                             sizeof(workspace_bytes));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(lt_.get(), p.op.get(), p.a.get(), p.b.get(), p.c.get(), p.c.get(), pref, 1,
                                       &result, &found);
  if (pref) (void)cublasLtMatmulPreferenceDestroy(pref);
  if (s == CUBLAS_STATUS_SUCCESS && found == 0) s = CUBLAS_STATUS_NOT_SUPPORTED;
  if (s != CUBLAS_STATUS_SUCCESS) return nullptr;  // (p's handles are released)
  p.algo = result.algo;
  p.workspace = result.workspaceSize;
  return &plans_.emplace(shape, std::move(p)).first->second;
}

cublasStatus_t LtGemm::run(cudaDataType_t in_type, const void* w, const void* x, int64_t ldx, void* out,
                           cudaDataType_t out_type, int64_t m, int64_t n, int64_t k, int64_t ldc, void* workspace,
                           size_t workspace_bytes, cudaStream_t stream, bool accumulate) {
  cublasStatus_t s;
  const Plan* p = plan({m, n, k, ldc, ldx, static_cast<int64_t>(in_type), static_cast<int64_t>(out_type),
                        static_cast<int64_t>(workspace_bytes), 0},
                       s);
  if (p == nullptr) return s;
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  return cublasLtMatmul(lt_.get(), p->op.get(), &one, w, p->a.get(), x, p->b.get(), &beta, out, p->c.get(), out,
                        p->c.get(), &p->algo, workspace, p->workspace, stream);
}

cublasStatus_t LtGemm::runW8a8(cudaDataType_t code_type, const void* w, const float* w_scale, const void* x,
                               const float* x_scale, void* out, cudaDataType_t out_type, int64_t m, int64_t n,
                               int64_t k, int64_t ldc, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                               bool accumulate) {
  const bool scaled = w_scale != nullptr && x_scale != nullptr;
  const bool int8 = code_type == CUDA_R_8I;
  if (int8 && (scaled || out_type != CUDA_R_32I)) return CUBLAS_STATUS_NOT_SUPPORTED;
  cublasStatus_t s;
  const Plan* p = plan({m, n, k, ldc, k, static_cast<int64_t>(code_type), static_cast<int64_t>(out_type),
                        static_cast<int64_t>(workspace_bytes), scaled ? 1 : 0},
                       s);
  if (p == nullptr) return s;
  if (scaled) {
    // The scale vectors are arguments of this call: set on the plan's descriptor each time
    // (a recorded graph keeps the pointers it was captured with).
    s = cublasLtMatmulDescSetAttribute(p->op.get(), CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof(w_scale));
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulDescSetAttribute(p->op.get(), CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof(x_scale));
    if (s != CUBLAS_STATUS_SUCCESS) return s;
  }
  if (int8) {
    const int32_t one = 1, beta = accumulate ? 1 : 0;
    return cublasLtMatmul(lt_.get(), p->op.get(), &one, w, p->a.get(), x, p->b.get(), &beta, out, p->c.get(), out,
                          p->c.get(), &p->algo, workspace, p->workspace, stream);
  }
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  return cublasLtMatmul(lt_.get(), p->op.get(), &one, w, p->a.get(), x, p->b.get(), &beta, out, p->c.get(), out,
                        p->c.get(), &p->algo, workspace, p->workspace, stream);
}

}  // namespace llmrt
