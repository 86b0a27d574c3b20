#include "core/tensor.h"

#include <cassert>

namespace llmrt {

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) push(d);
}

void Shape::push(int64_t d) {
  assert(rank_ < kMaxTensorRank);
  dims_[rank_++] = d;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

std::string Shape::toString() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

Shape contiguousStrides(const Shape& shape) {
  Shape s = shape;
  int64_t acc = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

TensorView::TensorView(void* d, DType dt, Shape sh, Device dev, int idx)
    : data(d), dtype(dt), shape(sh), strides(contiguousStrides(sh)), device(dev), device_index(idx) {}

bool TensorView::isContiguous() const { return strides == contiguousStrides(shape); }

}  // namespace llmrt
