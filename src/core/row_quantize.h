// Row-by-row quantization of a matrix, shared by the 8-bit rules (core/fp8.h, core/int8.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace llmrt {

// Each row of a contiguous [rows, cols] matrix of any float dtype (host memory) converted to
// float32 and handed to quantize_row(values, cols, codes of the row), which returns the row's
// scale (scales[row]); rows spread over `pool` when given.
template <typename Code, typename QuantizeRow>
void quantizeRowsBy(const TensorView& w, Code* codes, float* scales, ThreadPool* pool, QuantizeRow quantize_row) {
  const int64_t rows = w.shape[0], cols = w.shape.rank() >= 2 ? w.shape[1] : 1;
  const size_t esz = dtypeSize(w.dtype);
  auto band = [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t i = begin; i < end; ++i) {
      convertToF32(static_cast<const char*>(w.data) + static_cast<size_t>(i * cols) * esz, w.dtype, row.data(),
                   row.size());
      scales[i] = quantize_row(row.data(), cols, codes + i * cols);
    }
  };
  if (pool != nullptr)
    pool->parallelFor(rows, band, 16);
  else
    band(0, rows);
}

}  // namespace llmrt
