// How much cuBLASLt's first heuristic choice leaves on the table for the model's product shapes:
// for each (n, k, output type) of a Llama-3-8B layer and a range of row counts m, time the
// heuristic's first algorithm and every other candidate it offers (up to 32), and print both.
// Weights rotate over 4 copies so each product reads them from HBM, as in a model step.
//
// Build and run on the GPU machine (nvcc and cuBLAS are there):
//   nvcc -O2 -std=c++17 -arch=sm_90a scripts/bench/gemm_algos.cu -lcublasLt -o /tmp/gemm_algos
//   /tmp/gemm_algos [m ...]
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                   \
  do {                                                                          \
    auto e_ = (x);                                                              \
    if (static_cast<int>(e_) != 0) {                                            \
      std::fprintf(stderr, "%s:%d %s = %d\n", __FILE__, __LINE__, #x, (int)e_); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

struct Shape {
  const char* name;
  int n, k;
  cudaDataType_t out;
};

int main(int argc, char** argv) {
  std::vector<int> ms = {8, 16, 32, 64, 96, 128, 160, 192, 227, 256, 320, 384, 448, 512, 1024, 2048, 8192};
  if (argc > 1) {
    ms.clear();
    for (int i = 1; i < argc; ++i) ms.push_back(std::atoi(argv[i]));
  }
  const Shape shapes[] = {{"qkv", 6144, 4096, CUDA_R_32F},
                          {"o", 4096, 4096, CUDA_R_32F},
                          {"gate_up", 28672, 4096, CUDA_R_16BF},
                          {"down", 4096, 14336, CUDA_R_32F}};
  const int copies = 4, reps = 20;
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
  std::printf("%-8s %6s %6s %6s  %10s %8s  %10s %8s %5s  %s\n", "shape", "m", "n", "k", "first_us", "TF/s", "best_us",
              "TF/s", "idx", "gain");
  for (const Shape& s : shapes) {
    const int mmax = 8192;
    std::vector<void*> w(copies);
    for (auto& p : w) {
      CK(cudaMalloc(&p, size_t(s.n) * s.k * 2));
      CK(cudaMemset(p, 0x3c, size_t(s.n) * s.k * 2));  // small bf16 values
    }
    void *x, *out;
    CK(cudaMalloc(&x, size_t(mmax) * s.k * 2));
    CK(cudaMemset(x, 0x3c, size_t(mmax) * s.k * 2));
    CK(cudaMalloc(&out, size_t(mmax) * s.n * 4));
    for (int m : ms) {
      cublasLtMatmulDesc_t op;
      CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
      CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
      cublasLtMatrixLayout_t a, b, c;
      CK(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, s.k, s.n, s.k));
      CK(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, s.k, m, s.k));
      CK(cublasLtMatrixLayoutCreate(&c, s.out, s.n, m, s.n));
      cublasLtMatmulPreference_t pref;
      CK(cublasLtMatmulPreferenceCreate(&pref));
      CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                              sizeof(ws_bytes)));
      cublasLtMatmulHeuristicResult_t res[32];
      int found = 0;
      CK(cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, c, c, pref, 32, res, &found));
      const float one = 1.f, zero = 0.f;
      double first = 0, best = 1e30;
      int best_i = -1;
      for (int i = 0; i < found; ++i) {
        bool ok = true;
        for (int r = 0; r < 3 && ok; ++r)  // warm up
          ok = cublasLtMatmul(lt, op, &one, w[r % copies], a, x, b, &zero, out, c, out, c, &res[i].algo, ws,
                              res[i].workspaceSize, st) == CUBLAS_STATUS_SUCCESS;
        if (!ok) continue;
        CK(cudaEventRecord(e0, st));
        for (int r = 0; r < reps; ++r)
          CK(cublasLtMatmul(lt, op, &one, w[r % copies], a, x, b, &zero, out, c, out, c, &res[i].algo, ws,
                            res[i].workspaceSize, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms_ = 0;
        CK(cudaEventElapsedTime(&ms_, e0, e1));
        const double us = 1000.0 * ms_ / reps;
        if (i == 0) first = us;
        if (us < best) best = us, best_i = i;
      }
      const double flops = 2.0 * m * s.n * double(s.k);
      std::printf("%-8s %6d %6d %6d  %10.2f %8.1f  %10.2f %8.1f %5d  %5.1f%%  (%d candidates)\n", s.name, m, s.n, s.k,
                  first, flops / first * 1e-6, best, flops / best * 1e-6, best_i, 100.0 * (first - best) / first,
                  found);
      std::fflush(stdout);
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(a);
      cublasLtMatrixLayoutDestroy(b);
      cublasLtMatrixLayoutDestroy(c);
      cublasLtMatmulDescDestroy(op);
    }
    for (auto p : w) cudaFree(p);
    cudaFree(x);
    cudaFree(out);
  }
  return 0;
}
