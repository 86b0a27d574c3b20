// The custom collectives of CUDA ranks in one process (cuda_collectives.cu): all-reduce sum and
// all-gather of float32 buffers through every rank's staging buffers, read over CUDA peer access
// (or directly, for ranks that share a device). No host involvement: the ranks' kernels meet in
// device memory, so a step with collectives can be recorded into a CUDA graph.
//
// Protocol (per call; every rank launches the same calls in the same order, with the same count):
//   1. block b of rank r copies its share of the input into r's staging buffer of this call's
//      parity (calls alternate between two buffers);
//   2. it raises its flag in every rank's flag array (slot [b][r]) to this call's value and waits
//      until every rank's block b has raised its flag in r's array (a barrier per block: block b
//      reads only what the blocks b of the ranks wrote);
//   3. one-shot: it sums its share from every rank's staging buffer, in rank order (rank 0's value plus rank 1's ...), into
//      the output; two-shot: it sums only the r-th part of its share, writes the sum back to its
//      own staging buffer, meets the ranks again (step 2, the next flag value) and copies every
//      part from its owner. Either way every rank ends with the same bits.
// Why two buffers suffice: rank p can write a buffer again only two calls later, after passing the
// next call's barrier, which every rank reaches only once it has finished reading this call's.
// Flag values only grow (a block waits for "at least this call's value"), so calls of different
// grid sizes share the flag slots. The flags and the rank's call counter live in device memory
// (not kernel arguments), so a recorded graph replays correctly. A waiting block also polls an abort word in mapped host memory, so a
// rank that never comes cannot hang the others.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace llmrt::cuda {

constexpr int kCollectiveMaxRanks = 8;
constexpr int kCollectiveMaxBlocks = 64;

// The group's shared layout, passed to every kernel by value (pointers into each rank's memory).
struct CollectivePeers {
  float* staging[kCollectiveMaxRanks][2];          // each rank's two staging buffers (capacity floats each)
  unsigned long long* flags[kCollectiveMaxRanks];  // each rank's flags [kCollectiveMaxBlocks][kCollectiveMaxRanks]
  int ranks = 0;
};

// One rank's private device state.
struct CollectiveRankState {
  unsigned long long* counters = nullptr;  // [3]: last flag value, calls, blocks done; zeroed at creation
  const volatile int* abort_flag = nullptr;  // mapped host memory; nonzero: stop waiting
};

// Bytes of CollectiveRankState::counters and of one rank's flags.
constexpr size_t kCollectiveCounterBytes = sizeof(unsigned long long) * 3;
constexpr size_t kCollectiveFlagBytes = sizeof(unsigned long long) * kCollectiveMaxBlocks * kCollectiveMaxRanks;

// data[0..count) = the sum over ranks of their data[0..count) (in place). count <= capacity.
// two_shot: reduce-scatter then all-gather (reads 2 * count per rank instead of ranks * count).
cudaError_t customAllReduce(const CollectivePeers& peers, const CollectiveRankState& state, int rank, float* data,
                            int64_t count, bool two_shot, cudaStream_t stream);
// out[i, p * cols + j] = rank p's in[i, j] for in [rows, cols] (contiguous) and out rows ld_out
// floats apart. rows * cols <= capacity.
cudaError_t customAllGather(const CollectivePeers& peers, const CollectiveRankState& state, int rank,
                            const float* in, int64_t rows, int64_t cols, float* out, int64_t ld_out,
                            cudaStream_t stream);

}  // namespace llmrt::cuda
