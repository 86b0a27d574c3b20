// All-reduce latency of tensor-parallel CUDA ranks (makeCudaGroup: one thread per rank, rank r
// on GPU r % visible GPUs, as the engine places them): the custom kernels against NCCL, per
// message size, issued one after another on each rank's stream ("eager": what a step run op by
// op pays, launches included) and replayed from a CUDA graph holding the same calls ("graph": what
// a recorded decode step pays). Each figure is the slowest rank's mean time per call.
//
//   llmrt_collectives_bench [--ranks N] [--iters I] [FLOATS ...]
//     N      ranks (default: every visible GPU, at least 2)
//     I      calls per timing (default 200)
//     FLOATS message sizes in float32 elements (default: 4096 8192 32768 131072 524288 2097152 8388608;
//            a decode step of one sequence all-reduces hidden_size floats: 4096 for Llama-3-8B)
// Output: one JSON line per (mode, size): {"mode", "ranks", "floats", "bytes", "eager_us",
// "graph_us", "graph_algbw_gbs"}; a mode that cannot run (NCCL missing) prints {"mode", "error"}.
// NVLink multicast stays off in NCCL (NCCL_NVLS_ENABLE=0 is set unless the caller set it).
#include <cuda_runtime.h>

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_communicator.h"

namespace llmrt {
namespace {

struct Timing {
  double eager_ms = 0;
  double graph_ms = 0;
  std::string error;
};

#define BENCH_CUDA(call)                                                                        \
  do {                                                                                          \
    const cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) return std::string(#call) + ": " + cudaGetErrorString(e_);          \
  } while (0)
#define BENCH_STATUS(call)                                                                      \
  do {                                                                                          \
    const Status s_ = (call);                                                                   \
    if (!s_.isOk()) return std::string(#call) + ": " + s_.toString();                          \
  } while (0)

// One rank's timings of `iters` all-reduces of `count` floats ("" or why it failed). Every rank
// runs this at once; `sync` lines them up before each timing.
std::string timeRank(CudaCommunicator& comm, int64_t count, int iters, std::barrier<>& sync, Timing& t) {
  BENCH_CUDA(cudaSetDevice(comm.device()));
  cudaStream_t stream = nullptr;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* data = nullptr;
  BENCH_CUDA(cudaMalloc(&data, static_cast<size_t>(count) * sizeof(float)));
  BENCH_CUDA(cudaMemsetAsync(data, 0, static_cast<size_t>(count) * sizeof(float), stream));
  cudaEvent_t start = nullptr, stop = nullptr;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  auto timed = [&](auto&& enqueue, double& ms) -> std::string {
    sync.arrive_and_wait();
    BENCH_CUDA(cudaEventRecord(start, stream));
    if (std::string e = enqueue(); !e.empty()) return e;
    BENCH_CUDA(cudaEventRecord(stop, stream));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float f = 0;
    BENCH_CUDA(cudaEventElapsedTime(&f, start, stop));
    ms = f;
    return "";
  };
  auto calls = [&]() -> std::string {
    for (int i = 0; i < iters; ++i) BENCH_STATUS(comm.allReduceSumAsync(data, count, stream));
    return "";
  };
  std::string e = calls();  // warm-up (NCCL sets up its channels on first use)
  if (e.empty()) e = timed(calls, t.eager_ms);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (e.empty()) {
    sync.arrive_and_wait();
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) e = "cannot capture";
    if (e.empty()) e = calls();
    if (cudaStreamEndCapture(stream, &graph) != cudaSuccess && e.empty()) e = "capture failed";
    if (e.empty() && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) e = "cannot instantiate the graph";
  }
  auto replay = [&]() -> std::string {
    BENCH_CUDA(cudaGraphLaunch(exec, stream));
    return "";
  };
  if (e.empty()) e = timed(replay, t.graph_ms);  // (warm-up replay)
  if (e.empty()) e = timed(replay, t.graph_ms);
  if (exec) (void)cudaGraphExecDestroy(exec);
  if (graph) (void)cudaGraphDestroy(graph);
  (void)cudaStreamSynchronize(stream);
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  (void)cudaFree(data);
  (void)cudaStreamDestroy(stream);
  return e;
}

int run(int ranks, int iters, const std::vector<int64_t>& sizes) {
  const int gpus = cudaDeviceCount();
  if (gpus == 0) {
    std::fprintf(stderr, "llmrt_collectives_bench: no CUDA device\n");
    return 1;
  }
  for (const bool custom : {true, false}) {
    const char* mode = custom ? "custom" : "nccl";
    CudaGroupOptions g;
    for (int r = 0; r < ranks; ++r) g.devices.push_back(r % gpus);
    g.custom_all_reduce = custom;
    auto comms = makeCudaGroup(g);
    if (!comms.isOk()) {
      std::printf("%s\n", nlohmann::json{{"mode", mode}, {"ranks", ranks}, {"error", comms.status().toString()}}.dump().c_str());
      continue;
    }
    for (const int64_t count : sizes) {
      // Past kCustomAllReduceMaxBytes the group hands even "custom" calls to NCCL.
      std::vector<Timing> t(static_cast<size_t>(ranks));
      std::barrier<> sync(ranks);
      std::vector<std::thread> threads;
      for (int r = 0; r < ranks; ++r)
        threads.emplace_back([&, r] {
          auto& comm = static_cast<CudaCommunicator&>(*(*comms)[static_cast<size_t>(r)]);
          t[static_cast<size_t>(r)].error = timeRank(comm, count, iters, sync, t[static_cast<size_t>(r)]);
          if (!t[static_cast<size_t>(r)].error.empty()) comm.abort(internalError(t[static_cast<size_t>(r)].error));
        });
      for (std::thread& th : threads) th.join();
      nlohmann::json line{{"mode", mode}, {"ranks", ranks}, {"gpus", std::min(ranks, gpus)}, {"floats", count},
                          {"bytes", count * 4}};
      std::string error;
      double eager = 0, graph = 0;
      for (const Timing& x : t) {
        if (!x.error.empty() && error.empty()) error = x.error;
        eager = std::max(eager, x.eager_ms);
        graph = std::max(graph, x.graph_ms);
      }
      if (!error.empty()) {
        line["error"] = error;
        std::printf("%s\n", line.dump().c_str());
        std::fflush(stdout);
        break;  // (an aborted group serves no more calls)
      }
      line["eager_us"] = eager * 1e3 / iters;
      line["graph_us"] = graph * 1e3 / iters;
      line["graph_algbw_gbs"] = static_cast<double>(count) * 4 / (graph * 1e-3 / iters) / 1e9;
      std::printf("%s\n", line.dump().c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace llmrt

int main(int argc, char** argv) {
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // (before NCCL loads)
  int ranks = 0, iters = 200;
  std::vector<int64_t> sizes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--ranks" || a == "--iters") && i + 1 < argc) {
      (a == "--ranks" ? ranks : iters) = std::atoi(argv[++i]);
    } else if (!a.empty() && a[0] != '-' && std::atoll(a.c_str()) > 0) {
      sizes.push_back(std::atoll(a.c_str()));
    } else {
      std::fprintf(stderr, "usage: llmrt_collectives_bench [--ranks N] [--iters I] [FLOATS ...]\n");
      return 2;
    }
  }
  if (ranks <= 0) ranks = std::max(2, llmrt::cudaDeviceCount());
  if (iters <= 0) iters = 200;
  if (sizes.empty()) sizes = {4096, 8192, 32768, 131072, 524288, 2097152, 8388608};
  return llmrt::run(ranks, iters, sizes);
}
