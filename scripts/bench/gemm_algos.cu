// How much cuBLASLt's first heuristic choice leaves on the table for the model's product shapes:
// for each (n, k, output type) of a Llama-3-8B layer and a range of row counts m, time the
// heuristic's first algorithm and every other candidate it offers (up to 32), and print both.
// Weights rotate over 4 copies so each product reads them from HBM, as in a model step. (beta = 0:
// the o and down products of the model add into the residual, beta = 1, which also reads C.)
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

#include "bench_cuda.cuh"

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
      fillBf16<<<1024, 256>>>(static_cast<__nv_bfloat16*>(p), size_t(s.n) * s.k,
                              17u + unsigned(&p - w.data()));
    }
    void *x, *out;
    CK(cudaMalloc(&x, size_t(mmax) * s.k * 2));
    fillBf16<<<1024, 256>>>(static_cast<__nv_bfloat16*>(x), size_t(mmax) * s.k, 5u);
    CK(cudaDeviceSynchronize());
    CK(cudaMalloc(&out, size_t(mmax) * s.n * 4));
    cublasLtMatmulDesc_t op;
    CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                            sizeof(ws_bytes)));
    struct Layouts {
      cublasLtMatrixLayout_t a, b, c;
    };
    auto layouts = [&](int m) {
      Layouts l;
      CK(cublasLtMatrixLayoutCreate(&l.a, CUDA_R_16BF, s.k, s.n, s.k));
      CK(cublasLtMatrixLayoutCreate(&l.b, CUDA_R_16BF, s.k, m, s.k));
      CK(cublasLtMatrixLayoutCreate(&l.c, s.out, s.n, m, s.n));
      return l;
    };
    auto drop = [](Layouts& l) {
      cublasLtMatrixLayoutDestroy(l.a);
      cublasLtMatrixLayoutDestroy(l.b);
      cublasLtMatrixLayoutDestroy(l.c);
    };
    const float one = 1.f, zero = 0.f;
    // Microseconds per product with `algo` (negative when it does not run).
    auto timeAlgo = [&](const Layouts& l, const cublasLtMatmulAlgo_t& algo, size_t wsz) {
      for (int r = 0; r < 3; ++r)  // warm up
        if (cublasLtMatmul(lt, op, &one, w[r % copies], l.a, x, l.b, &zero, out, l.c, out, l.c, &algo, ws, wsz,
                           st) != CUBLAS_STATUS_SUCCESS)
          return -1.0;
      CK(cudaEventRecord(e0, st));
      for (int r = 0; r < reps; ++r)
        CK(cublasLtMatmul(lt, op, &one, w[r % copies], l.a, x, l.b, &zero, out, l.c, out, l.c, &algo, ws, wsz, st));
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms_ = 0;
      CK(cudaEventElapsedTime(&ms_, e0, e1));
      return 1000.0 * ms_ / reps;
    };
    for (int m : ms) {
      Layouts l = layouts(m);
      cublasLtMatmulHeuristicResult_t res[32];
      int found = 0;
      CK(cublasLtMatmulAlgoGetHeuristic(lt, op, l.a, l.b, l.c, l.c, pref, 32, res, &found));
      double first = -1, best = 1e30;
      int best_i = -1;
      for (int i = 0; i < found; ++i) {
        const double us = timeAlgo(l, res[i].algo, res[i].workspaceSize);
        if (us < 0) continue;
        if (i == 0) first = us;
        if (us < best) best = us, best_i = i;
      }
      // The first heuristic choice for the power-of-two bucket's largest m, run at this m.
      int top = 1;
      while (top < m) top *= 2;
      Layouts lt_top = layouts(top);
      cublasLtMatmulHeuristicResult_t rt{};
      int ft = 0;
      CK(cublasLtMatmulAlgoGetHeuristic(lt, op, lt_top.a, lt_top.b, lt_top.c, lt_top.c, pref, 1, &rt, &ft));
      double bucket = -1;
      cublasLtMatmulHeuristicResult_t chk{};
      if (ft > 0 && cublasLtMatmulAlgoCheck(lt, op, l.a, l.b, l.c, l.c, &rt.algo, &chk) == CUBLAS_STATUS_SUCCESS &&
          chk.workspaceSize <= ws_bytes)
        bucket = timeAlgo(l, rt.algo, chk.workspaceSize);
      drop(lt_top);
      const double flops = 2.0 * m * s.n * double(s.k);
      if (first <= 0 || best_i < 0) {  // the heuristic's first choice (or every candidate) did not run
        std::printf("%-8s %6d %6d %6d  first candidate failed (best %d of %d)\n", s.name, m, s.n, s.k, best_i, found);
        drop(l);
        continue;
      }
      std::printf("%-8s %6d %6d %6d  %10.2f %8.1f  %10.2f %8.1f %5d  %5.1f%%  bucket-top algo %8.2f  (%d candidates)\n",
                  s.name, m, s.n, s.k, first, flops / first * 1e-6, best, flops / best * 1e-6, best_i,
                  100.0 * (first - best) / first, bucket, found);
      std::fflush(stdout);
      drop(l);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatmulDescDestroy(op);
    for (auto p : w) cudaFree(p);
    cudaFree(x);
    cudaFree(out);
  }
  return 0;
}
