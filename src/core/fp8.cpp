#include "core/fp8.h"

#include "core/row_quantize.h"

namespace llmrt {

void quantizeFp8Rows(const TensorView& w, uint8_t* codes, float* scales, ThreadPool* pool) {
  quantizeRowsBy(w, codes, scales, pool,
                 [](const float* v, int64_t n, uint8_t* c) { return quantizeFp8Row(v, n, c).scale; });
}

}  // namespace llmrt
