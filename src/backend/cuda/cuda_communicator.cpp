// makeCudaGroup: the group's shared state (staging buffers, flags, NCCL communicators) and each
// rank's CudaCommunicator over it. NCCL is opened with dlopen, as cuBLAS is (cuda_blas_loader.cpp):
// nothing links it, and a machine without it still runs the custom kernels.
#include <cuda.h>
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <utility>
#include <string>
#include <vector>

#include "backend/comm/host_barrier.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_collectives.h"
#include "backend/cuda/cuda_communicator.h"
#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/cuda_status.h"
#include "core/logging.h"

namespace llmrt {
namespace {

// ---- NCCL, opened on demand ---------------------------------------------------------------

struct Nccl {
  decltype(&ncclGetErrorString) getErrorString = nullptr;
  decltype(&ncclCommInitAll) commInitAll = nullptr;
  decltype(&ncclCommDestroy) commDestroy = nullptr;
  decltype(&ncclCommAbort) commAbort = nullptr;
  decltype(&ncclAllReduce) allReduce = nullptr;
  std::string error;  // why it could not be opened ("" when it was)
};

const Nccl& nccl() {
  static Nccl n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
#ifdef LLMRT_CUDA_LIBRARY_DIR
    if (!h) h = dlopen(LLMRT_CUDA_LIBRARY_DIR "/libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
#endif
    if (!h) {
      const char* why = dlerror();
      n.error = std::string("cannot load libnccl.so.2 (") + (why ? why : "not found") +
                "): add the directory holding it to LD_LIBRARY_PATH";
      return;
    }
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && n.error.empty()) n.error = std::string("libnccl.so.2 lacks ") + name;
    };
    get(n.getErrorString, "ncclGetErrorString");
    get(n.commInitAll, "ncclCommInitAll");
    get(n.commDestroy, "ncclCommDestroy");
    get(n.commAbort, "ncclCommAbort");
    get(n.allReduce, "ncclAllReduce");
  });
  return n;
}

Status ncclStatus(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status::ok();
  const char* text = nccl().getErrorString ? nccl().getErrorString(r) : "?";
  return internalError(std::string("NCCL ") + what + ": " + text);
}

// ---- the group ---------------------------------------------------------------------------------

struct GroupState {
  std::vector<int> devices;
  bool custom_small = true;  // the custom kernels for messages up to kCustomAllReduceMaxBytes
  bool use_nccl = false;     // NCCL communicators exist (else the custom kernels serve every size)
  int64_t capacity = 0;      // floats per staging buffer
  cuda::CollectivePeers peers;
  std::vector<cuda::CollectiveRankState> states;
  std::vector<DeviceMemory> memory;  // staging, flags and counters of every rank
  PinnedMemory abort_word;           // mapped: the kernels poll it while they wait
  std::vector<ncclComm_t> comms;
  std::unique_ptr<HostBarrier> barrier;  // (the ranks are threads of this process)
  // Each rank's stream and device buffer for the host collectives, made with the group: an
  // allocation while another rank's kernel waits on a shared GPU would wait for it forever.
  std::vector<CudaStream> host_streams;
  std::vector<float*> host_buffers;  // (in `memory`)

  std::shared_mutex nccl_mu;  // NCCL calls (shared) against abort's ncclCommAbort (exclusive)

  ~GroupState() {
    for (ncclComm_t c : comms)
      if (c) (void)nccl().commDestroy(c);
  }

  Status abortedStatus() { return barrier->aborted(); }
  // Releases every waiting rank: the custom kernels poll the abort word; NCCL's communicators
  // are aborted (their queued collectives end) and dropped.
  void abort(const Status& why) {
    barrier->abort(why);
    if (abort_word) *static_cast<volatile int*>(abort_word.get()) = 1;
    std::unique_lock<std::shared_mutex> lock(nccl_mu);
    for (ncclComm_t& c : comms)
      if (c) (void)nccl().commAbort(std::exchange(c, nullptr));
  }
};

// Floats of each rank's host-collective buffer (larger host collectives are refused).
constexpr int64_t kHostCollectiveFloats = int64_t{1} << 18;

class CudaGroupCommunicator final : public CudaCommunicator {
 public:
  CudaGroupCommunicator(std::shared_ptr<GroupState> g, int rank) : g_(std::move(g)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(g_->devices.size()); }
  int device() const override { return g_->devices[static_cast<size_t>(rank_)]; }

  Status allReduceSumAsync(float* data, int64_t count, cudaStream_t stream) override {
    LLMRT_RETURN_IF_ERROR(g_->abortedStatus());
    if (count < 0) return invalidArgument("allReduceSum: negative count");
    if (size() == 1) return Status::ok();  // (a group of one has nothing to add)
    const int64_t bytes = count * static_cast<int64_t>(sizeof(float));
    if (g_->use_nccl && !(g_->custom_small && bytes <= kCustomAllReduceMaxBytes)) {
      std::shared_lock<std::shared_mutex> lock(g_->nccl_mu);
      ncclComm_t comm = g_->comms[static_cast<size_t>(rank_)];
      if (comm == nullptr) return g_->abortedStatus();  // (aborted meanwhile)
      return ncclStatus(nccl().allReduce(data, data, static_cast<size_t>(count), ncclFloat32, ncclSum, comm, stream),
                        "allReduce");
    }
    // Two-shot reads 2 * count per rank instead of ranks * count: better from a few ranks and
    // messages past decode size.
    const bool two_shot = size() > 2 && bytes > (256 << 10);
    for (int64_t at = 0; at < count; at += g_->capacity) {
      const int64_t n = std::min(g_->capacity, count - at);
      LLMRT_CUDA_RETURN_IF_ERROR(cuda::customAllReduce(g_->peers, g_->states[static_cast<size_t>(rank_)], rank_,
                                                       data + at, n, two_shot, stream));
    }
    return Status::ok();
  }

  Status allGatherAsync(const float* in, int64_t rows, int64_t cols, float* out, int64_t ld_out,
                        cudaStream_t stream) override {
    LLMRT_RETURN_IF_ERROR(g_->abortedStatus());
    if (rows < 0 || cols < 0 || ld_out < cols * size()) return invalidArgument("allGather: bad shape");
    if (cols > g_->capacity)
      return invalidArgument("allGather: rows of " + std::to_string(cols) + " floats exceed the staging capacity " +
                             std::to_string(g_->capacity));
    const int64_t piece = g_->capacity / std::max<int64_t>(cols, 1);  // whole rows per call
    for (int64_t row = 0; row < rows; row += piece) {
      const int64_t n = std::min(piece, rows - row);
      LLMRT_CUDA_RETURN_IF_ERROR(cuda::customAllGather(g_->peers, g_->states[static_cast<size_t>(rank_)], rank_,
                                                       in + row * cols, n, cols, out + row * ld_out, ld_out, stream));
    }
    return Status::ok();
  }

  // ---- host collectives: through the rank's device buffer and stream (made with the group) ----
  Status allReduceSum(float* data, int64_t count) override {
    LLMRT_RETURN_IF_ERROR(toDevice(data, count, count));
    LLMRT_RETURN_IF_ERROR(allReduceSumAsync(buffer(), count, stream()));
    return fromDevice(buffer(), data, count);
  }
  Status allGather(const float* in, int64_t count, float* out) override {
    LLMRT_RETURN_IF_ERROR(toDevice(in, count, count * (size() + 1)));
    LLMRT_RETURN_IF_ERROR(allGatherAsync(buffer(), 1, count, buffer() + count, count * size(), stream()));
    return fromDevice(buffer() + count, out, count * size());
  }
  Status broadcast(float* data, int64_t count, int root) override {
    if (root < 0 || root >= size())
      return invalidArgument("broadcast: root " + std::to_string(root) + " of a group of " + std::to_string(size()));
    std::vector<float> all(static_cast<size_t>(count * size()));
    LLMRT_RETURN_IF_ERROR(allGather(data, count, all.data()));
    std::copy_n(all.data() + static_cast<int64_t>(root) * count, count, data);
    return Status::ok();
  }
  // On the host: the ranks are threads of this process.
  Status barrier() override { return g_->barrier->arriveAndWait(); }
  void abort(const Status& why) override { g_->abort(why); }

 private:
  cudaStream_t stream() const { return g_->host_streams[static_cast<size_t>(rank_)].get(); }
  float* buffer() const { return g_->host_buffers[static_cast<size_t>(rank_)]; }
  Status toDevice(const float* src, int64_t count, int64_t floats) {
    if (count < 0) return invalidArgument("host collective: negative count");
    if (floats > kHostCollectiveFloats)
      return invalidArgument("host collective of " + std::to_string(floats) + " floats; at most " +
                             std::to_string(kHostCollectiveFloats) + " (use the backend's collectives)");
    LLMRT_CUDA_RETURN_IF_ERROR(cudaSetDevice(device()));
    if (count > 0)
      LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buffer(), src, static_cast<size_t>(count) * sizeof(float),
                                                 cudaMemcpyHostToDevice, stream()));
    return Status::ok();
  }
  Status fromDevice(const float* dev, float* dst, int64_t count) {
    if (count > 0)
      LLMRT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, dev, static_cast<size_t>(count) * sizeof(float),
                                                 cudaMemcpyDeviceToHost, stream()));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
    return g_->abortedStatus();  // (an abort during the wait leaves garbage: say so)
  }

  std::shared_ptr<GroupState> g_;
  int rank_;
};

// Whether CUDA loads kernels lazily (at their first launch; the default since CUDA 12.2).
bool lazyLoading() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuModuleGetLoadingMode", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || fn == nullptr) {
    (void)cudaGetLastError();
    return true;  // (unknown: assume the default)
  }
  CUmoduleLoadingMode mode{};
  if (reinterpret_cast<CUresult (*)(CUmoduleLoadingMode*)>(fn)(&mode) != CUDA_SUCCESS) return true;
  return mode == CU_MODULE_LAZY_LOADING;
}

// Peer access between every pair of distinct devices of the group (each direction).
Status enablePeerAccess(const std::vector<int>& devices) {
  for (int a : devices)
    for (int b : devices) {
      if (a == b) continue;
      int can = 0;
      LLMRT_CUDA_RETURN_IF_ERROR(cudaDeviceCanAccessPeer(&can, a, b));
      if (!can)
        return failedPrecondition("GPU " + std::to_string(a) + " cannot access GPU " + std::to_string(b) +
                                  "'s memory (no peer access): tensor-parallel CUDA ranks need it (their all-gather "
                                  "and small all-reduces read each other's buffers)");
      LLMRT_CUDA_RETURN_IF_ERROR(cudaSetDevice(a));
      const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();
      else
        LLMRT_CUDA_RETURN_IF_ERROR(e);
    }
  return Status::ok();
}

Status createCustom(GroupState& g) {
  const int n = static_cast<int>(g.devices.size());
  LLMRT_RETURN_IF_ERROR(enablePeerAccess(g.devices));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(g.abort_word.out(), sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  *static_cast<volatile int*>(g.abort_word.get()) = 0;
  int* abort_dev = nullptr;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(reinterpret_cast<void**>(&abort_dev), g.abort_word.get(), 0));
  g.peers.ranks = n;
  for (int r = 0; r < n; ++r) {
    LLMRT_CUDA_RETURN_IF_ERROR(cudaSetDevice(g.devices[static_cast<size_t>(r)]));
    auto alloc = [&](size_t bytes) -> Result<void*> {
      DeviceMemory m;
      LLMRT_CUDA_RETURN_IF_ERROR(cudaMalloc(m.out(), bytes));
      LLMRT_CUDA_RETURN_IF_ERROR(cudaMemset(m.get(), 0, bytes));
      g.memory.push_back(std::move(m));
      return g.memory.back().get();
    };
    for (int parity = 0; parity < 2; ++parity) {
      LLMRT_ASSIGN_OR_RETURN(void* s, alloc(static_cast<size_t>(g.capacity) * sizeof(float)));
      g.peers.staging[r][parity] = static_cast<float*>(s);
    }
    LLMRT_ASSIGN_OR_RETURN(void* flags, alloc(cuda::kCollectiveFlagBytes));
    g.peers.flags[r] = static_cast<unsigned long long*>(flags);
    LLMRT_ASSIGN_OR_RETURN(void* counters, alloc(cuda::kCollectiveCounterBytes));
    g.states.push_back({static_cast<unsigned long long*>(counters), abort_dev});
    LLMRT_ASSIGN_OR_RETURN(void* host_buffer, alloc(static_cast<size_t>(kHostCollectiveFloats) * sizeof(float)));
    g.host_buffers.push_back(static_cast<float*>(host_buffer));
    CudaStream stream;
    LLMRT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(stream.out(), cudaStreamNonBlocking));
    g.host_streams.push_back(std::move(stream));
  }
  for (int r = 0; r < n; ++r) {  // (the zeroing above ran on each device's default stream)
    LLMRT_CUDA_RETURN_IF_ERROR(cudaSetDevice(g.devices[static_cast<size_t>(r)]));
    LLMRT_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<std::unique_ptr<Communicator>>> makeCudaGroup(const CudaGroupOptions& options) {
  const int n = static_cast<int>(options.devices.size());
  if (n < 1) return invalidArgument("makeCudaGroup: no devices");
  if (options.staging_floats < 1024)
    return invalidArgument("makeCudaGroup: staging_floats " + std::to_string(options.staging_floats) + " (at least 1024)");
  int count = 0;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  for (int d : options.devices)
    if (d < 0 || d >= count)
      return invalidArgument("makeCudaGroup: device " + std::to_string(d) + " of " + std::to_string(count) + " visible");
  std::vector<int> sorted = options.devices;
  std::sort(sorted.begin(), sorted.end());
  const bool shared_devices = std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();

  if (shared_devices && n > 1 && lazyLoading())
    // A kernel's first launch then waits for the GPU to go idle, while another rank's collective
    // on the same GPU waits for this rank: a deadlock (separate GPUs do not wait for each other).
    return failedPrecondition("tensor-parallel ranks sharing a GPU need CUDA's eager kernel loading: run with "
                              "CUDA_MODULE_LOADING=EAGER (lazy loading deadlocks them)");
  auto g = std::make_shared<GroupState>();
  g->barrier = std::make_unique<HostBarrier>(n);
  g->devices = options.devices;
  g->capacity = options.staging_floats;
  g->custom_small = options.custom_all_reduce;
  const bool nccl_possible = !shared_devices && nccl().error.empty();
  if (!options.custom_all_reduce && !nccl_possible)
    return failedPrecondition(std::string("tensor-parallel ranks with custom_all_reduce off need NCCL: ") +
                              (shared_devices ? "ranks share a GPU (NCCL needs one GPU per rank)" : nccl().error) +
                              "; turn custom_all_reduce on");
  int previous = 0;
  LLMRT_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  if (n > cuda::kCollectiveMaxRanks)
    return invalidArgument("tensor parallelism over CUDA ranks serves at most " + std::to_string(cuda::kCollectiveMaxRanks) +
                           " ranks (" + std::to_string(n) + " asked)");
  Status st = createCustom(*g);  // (the all-gather's, and the small all-reduces' with custom_all_reduce on)
  if (st.isOk() && nccl_possible) {
    g->comms.assign(static_cast<size_t>(n), nullptr);
    st = ncclStatus(nccl().commInitAll(g->comms.data(), n, g->devices.data()), "commInitAll");
    g->use_nccl = st.isOk();
    if (!st.isOk()) {
      for (ncclComm_t c : g->comms)
        if (c) (void)nccl().commDestroy(c);
      g->comms.clear();
      if (options.custom_all_reduce) {  // (the custom kernels serve every size instead)
        LLMRT_LOG_WARNING("tensor parallelism: %s; the custom all-reduce serves every message", st.message().c_str());
        st = Status::ok();
      }
    }
  }
  (void)cudaSetDevice(previous);
  LLMRT_RETURN_IF_ERROR(st);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(std::make_unique<CudaGroupCommunicator>(g, r));
  return ranks;
}

}  // namespace llmrt
