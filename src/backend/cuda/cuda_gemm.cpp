#include "backend/cuda/cuda_gemm.h"

#include <utility>

namespace llmrt {

cublasStatus_t LtGemm::init() { return cublasLtCreate(lt_.out()); }

cublasStatus_t LtGemm::run(cudaDataType_t in_type, const void* w, const void* x, int64_t ldx, void* out,
                           cudaDataType_t out_type, int64_t m, int64_t n, int64_t k, int64_t ldc, void* workspace,
                           size_t workspace_bytes, cudaStream_t stream, bool accumulate) {
  // Row-major out[m, n] = x W^T is column-major out^T[n, m] = W^T x^T with W stored
  // column-major [k, n] (ld k) used transposed and x^T column-major [k, m] (ld ldx).
  const Shape shape{m, n, k, ldc, ldx, static_cast<int64_t>(in_type), static_cast<int64_t>(out_type),
                    static_cast<int64_t>(workspace_bytes)};
  auto it = plans_.find(shape);
  if (it == plans_.end()) {
    if (plans_.size() > 4096) plans_.clear();  // many distinct batch sizes: start over
    Plan p;
    cublasStatus_t s = cublasLtMatmulDescCreate(p.op.out(), CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulDescSetAttribute(p.op.get(), CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulDescSetAttribute(p.op.get(), CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
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
    if (s != CUBLAS_STATUS_SUCCESS) return s;  // (p's handles are released)
    p.algo = result.algo;
    p.workspace = result.workspaceSize;
    it = plans_.emplace(shape, std::move(p)).first;
  }
  const Plan& p = it->second;
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  return cublasLtMatmul(lt_.get(), p.op.get(), &one, w, p.a.get(), x, p.b.get(), &beta, out, p.c.get(), out,
                        p.c.get(), &p.algo, workspace, p.workspace, stream);
}

}  // namespace llmrt
