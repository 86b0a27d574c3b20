#include "core/names.h"

#include <gtest/gtest.h>

#include <array>

namespace llmrt {
namespace {

TEST(NearestName, SuggestsTheClosePlausibleName) {
  constexpr std::array<std::string_view, 4> kFlags = {"--max-tokens", "--max-seq-len", "--min-tokens", "--model"};
  EXPECT_EQ(nearestName("--max-token", kFlags), "--max-tokens");
  EXPECT_EQ(nearestName("--max-tokesn", kFlags), "--max-tokens");  // adjacent swap
  EXPECT_EQ(nearestName("--MODEL", kFlags), "--model");
  EXPECT_EQ(nearestName("--temperature", kFlags), std::nullopt);  // nothing close
  EXPECT_EQ(didYouMean("--max-seqlen", kFlags), ", did you mean '--max-seq-len'?");
  EXPECT_EQ(didYouMean("--frobnicate", kFlags), "");
  EXPECT_EQ(nearestName(std::string(10000, 'x'), kFlags), std::nullopt);
}

}  // namespace
}  // namespace llmrt
