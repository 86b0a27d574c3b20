// Backend's default collectives: through the host, with the communicator's host collectives.
#include <algorithm>
#include <vector>

#include "backend/backend.h"
#include "backend/comm/communicator.h"

namespace llmrt {

namespace {
int64_t elements(const TensorView& t) { return t.shape.rank() >= 2 ? t.shape[0] * t.shape[t.shape.rank() - 1] : t.shape.numel(); }
}  // namespace

Status Backend::allReduceSum(Communicator& comm, TensorView t) {
  std::vector<float> host(static_cast<size_t>(elements(t)));
  LLMRT_RETURN_IF_ERROR(copyToHost(t, host.data()));
  LLMRT_RETURN_IF_ERROR(comm.allReduceSum(host.data(), static_cast<int64_t>(host.size())));
  return copyFromHost(host.data(), t);
}

Status Backend::allGatherColumns(Communicator& comm, const TensorView& local, TensorView out) {
  const int64_t rows = local.shape.rank() >= 2 ? local.shape[0] : 1;
  const int64_t cols = local.shape[local.shape.rank() - 1];
  const auto n = static_cast<size_t>(rows * cols), ranks = static_cast<size_t>(comm.size());
  if (out.shape[out.shape.rank() - 1] != cols * comm.size())
    return invalidArgument("allGatherColumns: out has " + std::to_string(out.shape[out.shape.rank() - 1]) +
                           " columns; expected " + std::to_string(cols * comm.size()));
  std::vector<float> mine(n), all(n * ranks), placed(n * ranks);
  LLMRT_RETURN_IF_ERROR(copyToHost(local, mine.data()));
  LLMRT_RETURN_IF_ERROR(comm.allGather(mine.data(), static_cast<int64_t>(n), all.data()));
  for (size_t p = 0; p < ranks; ++p)  // rank p's [rows, cols] block into its columns
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(all.data() + p * n + static_cast<size_t>(r * cols), cols,
                  placed.data() + static_cast<size_t>(r) * ranks * static_cast<size_t>(cols) + p * static_cast<size_t>(cols));
  return copyFromHost(placed.data(), out);
}

}  // namespace llmrt
