// Which cuBLASLt FP8 GEMM forms run on this GPU, and how fast, for the products of a Llama-3-8B
// layer: the bf16 GEMM the 16-bit path uses against E4M3 GEMMs with each way of applying the
// per-channel weight scale and the activation scale. Heuristic first choice per shape; weights
// rotate over 4 copies so each product reads them from HBM, as in a model step.
//   bf16        bf16 x bf16 -> D (fp32, or bf16 for gate_up), beta as the model's product
//   e4m3-sums   E4M3 -> fp32, no scales (what the sums path runs before its scaling kernel)
//   e4m3-outer  E4M3 -> bf16, outer-vector scales (per channel x per token), beta 0
//   e4m3-alphav E4M3 -> fp32, alpha a device vector over D's rows (per channel), beta host (1 for
//               the residual products), the activation scale a device scalar (per tensor)
//   e4m3-scalar E4M3 -> fp32, scalar scales for both operands, beta as the model's product
//
// Build and run on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90a scripts/bench/fp8_gemm_modes.cu -lcublasLt -o /tmp/fp8_gemm_modes
//   /tmp/fp8_gemm_modes [m ...]
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_cuda.cuh"

__global__ void fillE4m3(__nv_fp8_e4m3* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = __nv_fp8_e4m3(hashValue(i, seed) * 400.0f);
}
__global__ void fillF32(float* p, size_t n, float v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = v;
}

struct Shape {
  const char* name;
  int n, k;
  bool residual;  // the model adds this product into the float32 residual (beta 1)
};

enum Mode { kBf16, kSums, kOuter, kAlphaVec, kScalar, kModes };
const char* kModeNames[] = {"bf16", "e4m3-sums", "e4m3-outer", "e4m3-alphav", "e4m3-scalar"};

int main(int argc, char** argv) {
  std::vector<int> ms = {64, 256, 512, 1024, 2048, 4096, 8192};
  if (argc > 1) {
    ms.clear();
    for (int i = 1; i < argc; ++i) ms.push_back(std::atoi(argv[i]));
  }
  const Shape shapes[] = {{"qkv", 6144, 4096, false},
                          {"o", 4096, 4096, true},
                          {"gate_up", 28672, 4096, false},
                          {"down", 4096, 14336, true}};
  const int copies = 4, reps = 20, mmax = 8192;
  const size_t ws_bytes = 32u << 20;
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float *vec_n, *vec_m, *scalar;
  CK(cudaMalloc(&vec_n, 32768 * 4));
  CK(cudaMalloc(&vec_m, mmax * 4));
  CK(cudaMalloc(&scalar, 4));
  fillF32<<<64, 256>>>(vec_n, 32768, 1.0f / 448);
  fillF32<<<64, 256>>>(vec_m, mmax, 1.0f / 448);
  fillF32<<<1, 32>>>(scalar, 1, 1.0f / 448);
  std::printf("%-8s %6s %6s %6s", "shape", "m", "n", "k");
  for (int mo = 0; mo < kModes; ++mo) std::printf(" %13s", kModeNames[mo]);
  std::printf("   (us, TF/s; '-' where cuBLASLt has no algorithm)\n");
  for (const Shape& s : shapes) {
    std::vector<void*> w16(copies), w8(copies);
    for (int c = 0; c < copies; ++c) {
      CK(cudaMalloc(&w16[c], size_t(s.n) * s.k * 2));
      CK(cudaMalloc(&w8[c], size_t(s.n) * s.k));
      fillBf16<<<1024, 256>>>(static_cast<__nv_bfloat16*>(w16[c]), size_t(s.n) * s.k, 17u + c);
      fillE4m3<<<1024, 256>>>(static_cast<__nv_fp8_e4m3*>(w8[c]), size_t(s.n) * s.k, 17u + c);
    }
    void *x16, *x8, *out;
    CK(cudaMalloc(&x16, size_t(mmax) * s.k * 2));
    CK(cudaMalloc(&x8, size_t(mmax) * s.k));
    fillBf16<<<1024, 256>>>(static_cast<__nv_bfloat16*>(x16), size_t(mmax) * s.k, 5u);
    fillE4m3<<<1024, 256>>>(static_cast<__nv_fp8_e4m3*>(x8), size_t(mmax) * s.k, 5u);
    CK(cudaMalloc(&out, size_t(mmax) * s.n * 4));
    CK(cudaMemset(out, 0, size_t(mmax) * s.n * 4));
    CK(cudaDeviceSynchronize());
    for (int m : ms) {
      std::printf("%-8s %6d %6d %6d", s.name, m, s.n, s.k);
      for (int mo = 0; mo < kModes; ++mo) {
        const bool fp8 = mo != kBf16;
        cudaDataType_t in_t = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
        cudaDataType_t out_t = CUDA_R_32F;
        if (mo == kOuter || (mo == kBf16 && !s.residual && s.n == 28672)) out_t = CUDA_R_16BF;
        const float beta = (s.residual && mo != kOuter && mo != kSums) ? 1.0f : 0.0f;
        cublasLtMatmulDesc_t op;
        CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
        CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
        CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
        bool ok = true;
        if (mo == kOuter) {
          const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
          ok = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)) ==
                   0 &&
               cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)) ==
                   0 &&
               cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &vec_n,
                                              sizeof(vec_n)) == 0 &&
               cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &vec_m,
                                              sizeof(vec_m)) == 0;
        } else if (mo == kAlphaVec) {
          const int32_t pm = CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
          ok = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof(pm)) == 0 &&
               cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scalar,
                                              sizeof(scalar)) == 0;
        } else if (mo == kScalar) {
          ok = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scalar,
                                              sizeof(scalar)) == 0 &&
               cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scalar,
                                              sizeof(scalar)) == 0;
        }
        cublasLtMatrixLayout_t la, lb, lc;
        CK(cublasLtMatrixLayoutCreate(&la, in_t, s.k, s.n, s.k));
        CK(cublasLtMatrixLayoutCreate(&lb, in_t, s.k, m, s.k));
        CK(cublasLtMatrixLayoutCreate(&lc, out_t, s.n, m, s.n));
        cublasLtMatmulPreference_t pref;
        CK(cublasLtMatmulPreferenceCreate(&pref));
        CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                sizeof(ws_bytes)));
        cublasLtMatmulHeuristicResult_t res{};
        int found = 0;
        if (ok) {
          const auto hs = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &res, &found);
          ok = hs == CUBLAS_STATUS_SUCCESS && found > 0;
        }
        double us = -1;
        if (ok) {
          const float one = 1.0f;
          const void* alpha = mo == kAlphaVec ? static_cast<const void*>(vec_n) : &one;
          auto call = [&](int r) {
            return cublasLtMatmul(lt, op, alpha, fp8 ? w8[r % copies] : w16[r % copies], la, fp8 ? x8 : x16,
                                  lb, &beta, out, lc, out, lc, &res.algo, ws, res.workspaceSize, st);
          };
          for (int r = 0; r < 3 && ok; ++r) ok = call(r) == CUBLAS_STATUS_SUCCESS;
          if (ok) {
            CK(cudaEventRecord(e0, st));
            for (int r = 0; r < reps; ++r) CK(call(r));
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float t = 0;
            CK(cudaEventElapsedTime(&t, e0, e1));
            us = 1000.0 * t / reps;
          }
        }
        if (us > 0)
          std::printf(" %7.1f %5.0f", us, 2.0 * m * s.n * double(s.k) / us * 1e-6);
        else
          std::printf(" %13s", "-");
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(lc);
        cublasLtMatmulDescDestroy(op);
        (void)cudaGetLastError();
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    for (int c = 0; c < copies; ++c) cudaFree(w16[c]), cudaFree(w8[c]);
    cudaFree(x16);
    cudaFree(x8);
    cudaFree(out);
  }
  return 0;
}
