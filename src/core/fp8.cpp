#include "core/fp8.h"

#include <vector>

#include "core/thread_pool.h"

namespace llmrt {

void quantizeFp8Rows(const TensorView& w, uint8_t* codes, float* scales, ThreadPool* pool) {
  const int64_t rows = w.shape[0], cols = w.shape.rank() >= 2 ? w.shape[1] : 1;
  const size_t esz = dtypeSize(w.dtype);
  auto band = [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t i = begin; i < end; ++i) {
      convertToF32(static_cast<const char*>(w.data) + static_cast<size_t>(i * cols) * esz, w.dtype, row.data(),
                   row.size());
      scales[i] = quantizeFp8Row(row.data(), cols, codes + i * cols).scale;
    }
  };
  if (pool != nullptr)
    pool->parallelFor(rows, band, 16);
  else
    band(0, rows);
}

}  // namespace llmrt
