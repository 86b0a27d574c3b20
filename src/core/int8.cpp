#include "core/int8.h"

#include "core/row_quantize.h"

namespace llmrt {

void quantizeInt8Rows(const TensorView& w, int8_t* codes, float* scales, ThreadPool* pool) {
  quantizeRowsBy(w, codes, scales, pool,
                 [](const float* v, int64_t n, int8_t* c) { return quantizeInt8Row(v, n, c).scale; });
}

}  // namespace llmrt
