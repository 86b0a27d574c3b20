#include <gtest/gtest.h>

#include "core/mapped_file.h"
#include "core/tensor.h"

#include <cstdio>
#include <fstream>

namespace llmrt {
namespace {

TEST(Tensor, ShapeAndStrides) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.toString(), "[2, 3, 4]");
  EXPECT_EQ(contiguousStrides(s), (Shape{12, 4, 1}));
  float buf[24];
  TensorView v(buf, DType::kF32, s);
  EXPECT_TRUE(v.isContiguous());
  EXPECT_EQ(v.nbytes(), 96u);
  v.strides = Shape{1, 2, 6};
  EXPECT_FALSE(v.isContiguous());
  EXPECT_EQ(Shape{}.numel(), 1);  // scalar
}

TEST(MappedFile, MapsAndReportsErrors) {
  std::string path = ::testing::TempDir() + "/llmrt_mapped_file_test.bin";
  {
    std::ofstream f(path, std::ios::binary);
    f << "hello";
  }
  auto m = MappedFile::open(path);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  ASSERT_EQ(m->size(), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m->data()), 5), "hello");
  auto missing = MappedFile::open(path + ".nope");
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(".nope"), std::string::npos);
  auto dir = MappedFile::open(::testing::TempDir());
  EXPECT_FALSE(dir.isOk());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace llmrt
