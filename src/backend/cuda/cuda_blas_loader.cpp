// cuBLAS and cuBLASLt opened on demand. The binaries do not link them (hundreds of MB that every
// `llmrt` call, `--version` and CPU runs included, would otherwise map at start-up); instead this
// file defines the cuBLAS / cuBLASLt entry points the backend calls, each forwarding to the
// function of the same name in the library that loadCublasLibraries() opened with dlopen.
// Signatures come from the toolkit's headers, so a mismatch does not compile.
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "backend/cuda/cuda_backend_impl.h"

namespace llmrt {
namespace {

struct Libraries {
  void* blas = nullptr;
  void* lt = nullptr;
  std::string error;
};

void* openLibrary(const char* soname, std::string& error) {
  // By soname first (LD_LIBRARY_PATH, the loader cache), then where the toolkit that built us keeps it.
  if (void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL)) return h;
  std::string first = dlerror() ? dlerror() : "";
#ifdef LLMRT_CUDA_LIBRARY_DIR
  const std::string path = std::string(LLMRT_CUDA_LIBRARY_DIR) + "/" + soname;
  if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  const char* second = dlerror();
  if (second) first = second;
#endif
  error = std::string("cannot load ") + soname + " (" + first +
          "); the CUDA backend needs the CUDA 13 toolkit's cuBLAS: install it or add its lib64 to LD_LIBRARY_PATH";
  return nullptr;
}

Libraries& libraries() {
  static Libraries libs;
  static std::once_flag once;
  std::call_once(once, [] {
    libs.blas = openLibrary("libcublas.so.13", libs.error);
    if (libs.blas) libs.lt = openLibrary("libcublasLt.so.13", libs.error);
  });
  return libs;
}

void* symbol(bool lt, const char* name) {
  Libraries& libs = libraries();
  void* h = lt ? libs.lt : libs.blas;
  return h ? dlsym(h, name) : nullptr;
}

}  // namespace

Status loadCublasLibraries() {
  Libraries& libs = libraries();
  if (!libs.blas || !libs.lt) return failedPrecondition("CUDA backend: " + libs.error);
  return Status::ok();
}

}  // namespace llmrt

// Each entry point resolves its symbol once; before the libraries are loaded (never, in practice:
// CudaBackend::create loads them first) it reports CUBLAS_STATUS_NOT_INITIALIZED.
#define LLMRT_CUBLAS_FORWARD(lt, name, params, args)                                  \
  extern "C" cublasStatus_t CUBLASWINAPI name params {                                \
    using Fn = cublasStatus_t(CUBLASWINAPI*) params;                                   \
    static Fn fn = reinterpret_cast<Fn>(llmrt::symbol(lt, #name));                     \
    return fn ? fn args : CUBLAS_STATUS_NOT_INITIALIZED;                               \
  }

LLMRT_CUBLAS_FORWARD(false, cublasCreate_v2, (cublasHandle_t * handle), (handle))
LLMRT_CUBLAS_FORWARD(false, cublasDestroy_v2, (cublasHandle_t handle), (handle))
LLMRT_CUBLAS_FORWARD(false, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
LLMRT_CUBLAS_FORWARD(false, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
LLMRT_CUBLAS_FORWARD(false, cublasSetWorkspace_v2, (cublasHandle_t handle, void* workspace, size_t bytes),
                     (handle, workspace, bytes))
LLMRT_CUBLAS_FORWARD(false, cublasSgemm_v2,
                     (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                      const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta,
                      float* C, int ldc),
                     (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
LLMRT_CUBLAS_FORWARD(false, cublasGemmEx,
                     (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                      const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                      cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                      cublasComputeType_t computeType, cublasGemmAlgo_t algo),
                     (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                      computeType, algo))
LLMRT_CUBLAS_FORWARD(true, cublasLtCreate, (cublasLtHandle_t * handle), (handle))
LLMRT_CUBLAS_FORWARD(true, cublasLtDestroy, (cublasLtHandle_t handle), (handle))
LLMRT_CUBLAS_FORWARD(true, cublasLtMatmulDescCreate,
                     (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute, cudaDataType_t scale),
                     (desc, compute, scale))
LLMRT_CUBLAS_FORWARD(true, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
LLMRT_CUBLAS_FORWARD(true, cublasLtMatmulDescSetAttribute,
                     (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t size),
                     (desc, attr, buf, size))
LLMRT_CUBLAS_FORWARD(true, cublasLtMatrixLayoutCreate,
                     (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
                     (layout, type, rows, cols, ld))
LLMRT_CUBLAS_FORWARD(true, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout), (layout))
LLMRT_CUBLAS_FORWARD(true, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))
LLMRT_CUBLAS_FORWARD(true, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
LLMRT_CUBLAS_FORWARD(true, cublasLtMatmulPreferenceSetAttribute,
                     (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                      size_t size),
                     (pref, attr, buf, size))
LLMRT_CUBLAS_FORWARD(true, cublasLtMatmulAlgoGetHeuristic,
                     (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                      cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                      cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
                      int* returned),
                     (handle, desc, a, b, c, d, pref, requested, results, returned))
LLMRT_CUBLAS_FORWARD(true, cublasLtMatmul,
                     (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                      cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                      const void* C, cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                      const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSizeInBytes,
                      cudaStream_t stream),
                     (handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
                      workspaceSizeInBytes, stream))

#undef LLMRT_CUBLAS_FORWARD

extern "C" const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  using Fn = const char*(CUBLASWINAPI*)(cublasStatus_t);
  static Fn fn = reinterpret_cast<Fn>(llmrt::symbol(false, "cublasGetStatusName"));
  return fn ? fn(status) : "CUBLAS_STATUS_LIBRARY_NOT_LOADED";
}
