#include <gtest/gtest.h>

#include "llmrt/status.h"

namespace llmrt {
namespace {

Result<int> half(int x) {
  if (x % 2) return invalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> quarter(int x) {
  LLMRT_ASSIGN_OR_RETURN(int h, half(x));
  LLMRT_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

Status checkPositive(int x) {
  if (x <= 0) return fieldError("cfg.json", "n", std::to_string(x), "an integer >= 1");
  return Status::ok();
}

Status both(int a, int b) {
  LLMRT_RETURN_IF_ERROR(checkPositive(a));
  LLMRT_RETURN_IF_ERROR(checkPositive(b));
  return Status::ok();
}

TEST(Status, ResultPropagation) {
  auto r = quarter(12);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(*r, 3);
  auto bad = quarter(6);
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "odd: 3");
}

TEST(Status, FieldErrorNamesEverything) {
  Status s = both(1, -4);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "cfg.json: field 'n' has value -4; expected an integer >= 1");
  EXPECT_EQ(s.toString(), "InvalidArgument: cfg.json: field 'n' has value -4; expected an integer >= 1");
  EXPECT_EQ(s.withContext("loading x").message().rfind("loading x: cfg.json", 0), 0u);
  EXPECT_TRUE(both(1, 2).isOk());
  EXPECT_TRUE(Status::ok().withContext("x").isOk());
}

}  // namespace
}  // namespace llmrt
