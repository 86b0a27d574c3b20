// A non-owning view of an n-dimensional array: pointer, dtype, shape, strides
// (in elements) and the device the memory lives on. Views never free memory.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype.h"

namespace llmrt {

enum class Device : uint8_t { kCpu, kCuda, kCudaHostPinned };

constexpr int kMaxTensorRank = 6;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  template <typename It>
  Shape(It first, It last) {
    for (; first != last; ++first) push(static_cast<int64_t>(*first));
  }

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  void push(int64_t d);
  int64_t numel() const;
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string toString() const;  // "[2, 3, 4]"

 private:
  std::array<int64_t, kMaxTensorRank> dims_{};
  int rank_ = 0;
};

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  Shape strides;  // in elements; filled contiguously by the constructor
  Device device = Device::kCpu;
  int device_index = 0;

  TensorView() = default;
  TensorView(void* data, DType dtype, Shape shape, Device device = Device::kCpu, int device_index = 0);

  int64_t numel() const { return shape.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtypeSize(dtype); }
  bool isContiguous() const;
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

Shape contiguousStrides(const Shape& shape);

}  // namespace llmrt
