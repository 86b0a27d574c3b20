#include "loader/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/logging.h"
#include "loader_test_util.h"

namespace llmrt {
namespace {

using testutil::makeSafetensors;
using testutil::makeSafetensorsRaw;
using testutil::StTensor;
using testutil::TempDir;
using testutil::writeFile;

Result<SafetensorsHeader> parseBytes(const std::string& bytes, std::string_view where = "mem.safetensors") {
  return parseSafetensors(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), where);
}

// A one-tensor header with the given entry text.
std::string oneEntry(const std::string& entry, size_t data_bytes = 16) {
  return makeSafetensorsRaw("{\"w\": " + entry + "}", std::string(data_bytes, '\0'));
}

TEST(Safetensors, EveryDtypeRoundTripsZeroCopy) {
  TempDir tmp;
  std::vector<float> f32 = {1.5f, -2.25f, 3.0f, 0.0f, 1e-3f, -7.0f};
  std::vector<double> f64 = {1.0 / 3.0, -2.5};
  std::vector<int8_t> i8 = {-128, -1, 0, 127};
  std::vector<uint8_t> u8 = {0, 1, 200, 255};
  std::vector<int16_t> i16 = {-32768, 12345};
  std::vector<int32_t> i32 = {-2147483647 - 1, 7, 2147483647};
  std::vector<int64_t> i64 = {-(int64_t{1} << 62), 42};
  std::vector<uint8_t> boolean = {1, 0, 1};
  std::vector<uint16_t> f16(f32.size()), bf16(f32.size());
  std::vector<uint8_t> f8(f32.size());
  convertFromF32(f32.data(), f16.data(), DType::kF16, f32.size());
  convertFromF32(f32.data(), bf16.data(), DType::kBF16, f32.size());
  convertFromF32(f32.data(), f8.data(), DType::kF8E4M3, f32.size());

  // Odd-sized tensors first so later ones start unaligned.
  std::vector<StTensor> ts = {
      {"u8", "U8", {2, 2}, testutil::bytesOf(u8)},
      {"bool", "BOOL", {3}, testutil::bytesOf(boolean)},
      {"f32", "F32", {2, 3}, testutil::bytesOf(f32)},
      {"f16", "F16", {6}, testutil::bytesOf(f16)},
      {"bf16", "BF16", {3, 2}, testutil::bytesOf(bf16)},
      {"f8", "F8_E4M3", {6}, testutil::bytesOf(f8)},
      {"f64", "F64", {2}, testutil::bytesOf(f64)},
      {"i8", "I8", {4}, testutil::bytesOf(i8)},
      {"i16", "I16", {2}, testutil::bytesOf(i16)},
      {"i32", "I32", {3}, testutil::bytesOf(i32)},
      {"i64", "I64", {2}, testutil::bytesOf(i64)},
      {"scalar", "F32", {}, testutil::bytesOf(std::vector<float>{9.5f})},
      {"empty", "F32", {0, 4}, ""},
  };
  const std::string path = tmp.file("all.safetensors");
  writeFile(path, makeSafetensors(ts, {{"format", "pt"}, {"note", "hand made"}}));

  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.isOk()) << f.status().toString();
  EXPECT_EQ(f->tensors().size(), ts.size());
  EXPECT_EQ(f->header().metadata.at("format"), "pt");
  EXPECT_EQ(f->header().metadata.at("note"), "hand made");
  EXPECT_TRUE(f->header().warnings.empty());
  EXPECT_EQ(f->header().data_offset % 8, 0u);  // the writer padded the header

  auto check = [&](const std::string& name, DType dt, Shape shape, const std::string& bytes) {
    SCOPED_TRACE(name);
    auto t = f->tensor(name);
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    EXPECT_EQ(t->dtype, dt);
    EXPECT_EQ(t->shape, shape);
    EXPECT_EQ(t->device, Device::kCpu);
    EXPECT_EQ(t->nbytes(), bytes.size());
    const SafetensorsTensorInfo* info = f->find(name);
    ASSERT_NE(info, nullptr);
    // Zero-copy: the view points into the mapping, at 8 + N + begin.
    EXPECT_EQ(static_cast<const uint8_t*>(t->data), f->mappedData() + f->header().data_offset + info->begin);
    EXPECT_EQ(std::memcmp(t->data, bytes.data(), bytes.size()), 0);
  };
  for (const StTensor& t : ts) {
    check(t.name, *dtypeFromSafetensorsName(t.dtype), Shape(t.shape.begin(), t.shape.end()), t.data);
  }
  // Values read back through the dtype conversions (via aligned copies: bf16/f16
  // here start at odd addresses).
  EXPECT_NE(reinterpret_cast<uintptr_t>(f->tensor("f16")->data) % 2, 0u);
  EXPECT_FLOAT_EQ(testutil::toF32(*f->tensor("bf16"))[1], -2.25f);
  EXPECT_FLOAT_EQ(testutil::toF32(*f->tensor("f16"))[0], 1.5f);
  EXPECT_FLOAT_EQ(testutil::toF32(*f->tensor("f8"))[5], -7.0f);
  EXPECT_DOUBLE_EQ(testutil::toF32(*f->tensor("f64"))[1], -2.5f);
  int64_t v64;
  std::memcpy(&v64, f->tensor("i64")->data, 8);  // unaligned-safe read
  EXPECT_EQ(v64, -(int64_t{1} << 62));
  EXPECT_EQ(f->tensor("scalar")->numel(), 1);
  EXPECT_EQ(f->tensor("empty")->numel(), 0);

  EXPECT_ERROR_CONTAINS(f->tensor("nope"), "all.safetensors", "no tensor named 'nope'");
  EXPECT_EQ(f->tensor("nope").status().code(), StatusCode::kNotFound);
}

TEST(Safetensors, GapsAreWarningsNotErrors) {
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})";
  auto h = parseBytes(makeSafetensorsRaw(header, std::string(32, '\0')));
  ASSERT_TRUE(h.isOk()) << h.status().toString();
  ASSERT_EQ(h->warnings.size(), 2u);
  EXPECT_NE(h->warnings[0].find("before tensor 'b'"), std::string::npos) << h->warnings[0];
  EXPECT_NE(h->warnings[1].find("8 unused bytes at the end"), std::string::npos) << h->warnings[1];
  // Tensors come back in data order with their offsets.
  EXPECT_EQ(h->tensors[1].name, "b");
  EXPECT_EQ(h->tensors[1].begin, 16u);
  EXPECT_EQ(h->data_bytes, 32u);
}

TEST(Safetensors, OpenErrorsNameTheFile) {
  TempDir tmp;
  EXPECT_ERROR_CONTAINS(SafetensorsFile::open(tmp.file("missing.safetensors")), "missing.safetensors",
                        "cannot open");
  EXPECT_EQ(SafetensorsFile::open(tmp.file("missing.safetensors")).status().code(), StatusCode::kNotFound);

  writeFile(tmp.file("empty.safetensors"), "");
  EXPECT_ERROR_CONTAINS(SafetensorsFile::open(tmp.file("empty.safetensors")), "empty.safetensors", "0 bytes",
                        "too small");

  // A valid file cut short: first inside the data, then inside the header.
  std::vector<StTensor> ts = {{"w", "F32", {4}, testutil::floatData(DType::kF32, 4)}};
  const std::string good = makeSafetensors(ts);
  writeFile(tmp.file("cut_data.safetensors"), good.substr(0, good.size() - 4));
  EXPECT_ERROR_CONTAINS(SafetensorsFile::open(tmp.file("cut_data.safetensors")), "cut_data.safetensors",
                        "tensor 'w'", "data_offsets", "[0, 16]", "beyond the data");
  writeFile(tmp.file("cut_header.safetensors"), good.substr(0, 20));
  EXPECT_ERROR_CONTAINS(SafetensorsFile::open(tmp.file("cut_header.safetensors")), "cut_header.safetensors",
                        "header length", "beyond the end of the file", "file size 20");
}

TEST(Safetensors, RejectsBadFraming) {
  EXPECT_ERROR_CONTAINS(parseBytes("abc"), "mem.safetensors", "3 bytes", "too small");
  std::string big(8, '\0');
  const uint64_t n = 200'000'000;
  std::memcpy(big.data(), &n, 8);
  big += "{}";
  EXPECT_ERROR_CONTAINS(parseBytes(big), "header length 200000000", "exceeds the limit");
  EXPECT_EQ(parseBytes(big).status().code(), StatusCode::kParseError);
  std::string beyond(8, '\0');
  const uint64_t n2 = 1000;
  std::memcpy(beyond.data(), &n2, 8);
  beyond += "{}            ";
  EXPECT_ERROR_CONTAINS(parseBytes(beyond), "header length 1000", "beyond the end of the file",
                        "file size 22");
  EXPECT_EQ(parseBytes(beyond).status().code(), StatusCode::kOutOfRange);
  std::string huge(8, '\xff');  // 2^64 - 1: must not wrap around
  EXPECT_ERROR_CONTAINS(parseBytes(huge), "exceeds the limit");
}

TEST(Safetensors, RejectsBadJson) {
  EXPECT_ERROR_CONTAINS(parseBytes(makeSafetensorsRaw("{\"a\": ", "")), "mem.safetensors",
                        "safetensors header: invalid JSON");
  EXPECT_EQ(parseBytes(makeSafetensorsRaw("{\"a\": ", "")).status().code(), StatusCode::kParseError);
  EXPECT_ERROR_CONTAINS(parseBytes(makeSafetensorsRaw("[1, 2]", "")), "must be a JSON object", "[1,2]");
  EXPECT_ERROR_CONTAINS(parseBytes(makeSafetensorsRaw("", "")), "safetensors header: invalid JSON");
  EXPECT_ERROR_CONTAINS(parseBytes(makeSafetensorsRaw(std::string("{\"a\"\0:1}", 8), "")), "invalid JSON");
  EXPECT_ERROR_CONTAINS(
      parseBytes(makeSafetensorsRaw(
          R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          std::string(8, '\0'))),
      "mem.safetensors: safetensors header: duplicate key 'a'");
}

TEST(Safetensors, RejectsBadEntries) {
  EXPECT_ERROR_CONTAINS(parseBytes(oneEntry("5")), "field 'w' has value 5", "an object with dtype");
  EXPECT_ERROR_CONTAINS(parseBytes(oneEntry(R"({"shape":[4],"data_offsets":[0,16]})")), "tensor 'w'",
                        "missing field 'dtype'");
  EXPECT_ERROR_CONTAINS(parseBytes(oneEntry(R"({"dtype":"F32","data_offsets":[0,16]})")), "tensor 'w'",
                        "missing field 'shape'");
  EXPECT_ERROR_CONTAINS(parseBytes(oneEntry(R"({"dtype":"F32","shape":[4]})")), "tensor 'w'",
                        "missing field 'data_offsets'");
  EXPECT_ERROR_CONTAINS(parseBytes(oneEntry(R"({"dtype":5,"shape":[4],"data_offsets":[0,16]})")),
                        "field 'dtype' has value 5");
  // Unknown dtypes, including real safetensors dtypes this engine does not support.
  EXPECT_ERROR_CONTAINS(parseBytes(oneEntry(R"({"dtype":"F7","shape":[4],"data_offsets":[0,16]})")),
                        "tensor 'w'", "field 'dtype' has value \"F7\"", "unknown or unsupported dtype");
  EXPECT_ERROR_CONTAINS(parseBytes(oneEntry(R"({"dtype":"F8_E5M2","shape":[16],"data_offsets":[0,16]})")),
                        "\"F8_E5M2\"", "unknown");
  EXPECT_ERROR_CONTAINS(parseBytes(oneEntry(R"({"dtype":"F32","shape":[-4],"data_offsets":[0,16]})")),
                        "field 'shape' has value [-4]", "non-negative integers");
  EXPECT_ERROR_CONTAINS(parseBytes(oneEntry(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,16]})")),
                        "field 'shape' has value [2.5]");
  EXPECT_ERROR_CONTAINS(parseBytes(oneEntry(R"({"dtype":"F32","shape":"4","data_offsets":[0,16]})")),
                        "field 'shape' has value \"4\"");
  EXPECT_ERROR_CONTAINS(
      parseBytes(oneEntry(R"({"dtype":"U8","shape":[1,1,1,1,1,1,16],"data_offsets":[0,16]})")),
      "at most 6 dimensions");
  for (const char* offs : {"[0]", "[0,16,32]", "\"0-16\"", "[0,-16]", "[0.5,16]", "[-1,15]"}) {
    SCOPED_TRACE(offs);
    EXPECT_ERROR_CONTAINS(
        parseBytes(oneEntry(std::string(R"({"dtype":"F32","shape":[4],"data_offsets":)") + offs + "}")),
        "tensor 'w'", "field 'data_offsets'", "[begin, end]");
  }
}

TEST(Safetensors, RejectsBadOffsets) {
  auto end_before_begin = parseBytes(oneEntry(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})"));
  EXPECT_ERROR_CONTAINS(end_before_begin, "tensor 'w'", "field 'data_offsets' has value [8, 4]",
                        "end >= begin");
  auto beyond = parseBytes(oneEntry(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})", 8));
  EXPECT_ERROR_CONTAINS(beyond, "tensor 'w'", "[0, 16]", "data buffer of 8 bytes", "beyond the data");
  EXPECT_EQ(beyond.status().code(), StatusCode::kOutOfRange);
  auto far = parseBytes(
      oneEntry(R"({"dtype":"F32","shape":[4],"data_offsets":[9223372036854775000,9223372036854775016]})"));
  EXPECT_ERROR_CONTAINS(far, "beyond the data");
  // data size != shape x dtype size
  auto mismatch = parseBytes(oneEntry(R"({"dtype":"F32","shape":[3],"data_offsets":[0,16]})"));
  EXPECT_ERROR_CONTAINS(mismatch, "tensor 'w'", "a span of 12 bytes", "[3] x F32", "spans 16 bytes");
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  auto bf16_mismatch = parseBytes(oneEntry(R"({"dtype":"BF16","shape":[2,2],"data_offsets":[0,16]})"));
  EXPECT_ERROR_CONTAINS(bf16_mismatch, "a span of 8 bytes", "BF16");
  // numel * size overflows 64 bits
  auto overflow =
      parseBytes(oneEntry(R"({"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,16]})"));
  EXPECT_ERROR_CONTAINS(overflow, "tensor 'w'", "fits in 64 bits");
  auto overflow2 =
      parseBytes(oneEntry(R"({"dtype":"I64","shape":[2305843009213693952],"data_offsets":[0,16]})"));
  EXPECT_ERROR_CONTAINS(overflow2, "fits in 64 bits");
  // Overlap
  auto overlap = parseBytes(makeSafetensorsRaw(
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
      std::string(24, '\0')));
  EXPECT_ERROR_CONTAINS(overlap, "mem.safetensors", "'a'", "'b'", "[0, 16]", "[8, 24]", "overlap");
  auto same = parseBytes(makeSafetensorsRaw(
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"I32","shape":[4],"data_offsets":[0,16]}})",
      std::string(16, '\0')));
  EXPECT_ERROR_CONTAINS(same, "overlap");
  // Empty tensors occupy no bytes and overlap nothing.
  auto empty_inside = parseBytes(makeSafetensorsRaw(
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})",
      std::string(16, '\0')));
  EXPECT_TRUE(empty_inside.isOk()) << empty_inside.status().toString();
}

TEST(Safetensors, RejectsBadMetadata) {
  EXPECT_ERROR_CONTAINS(parseBytes(makeSafetensorsRaw(R"({"__metadata__": [1]})", "")), "__metadata__",
                        "an object of string values");
  EXPECT_ERROR_CONTAINS(parseBytes(makeSafetensorsRaw(R"({"__metadata__": {"format": 1}})", "")),
                        "__metadata__.format", "a string");
  auto ok = parseBytes(makeSafetensorsRaw(R"({"__metadata__": {"format": "pt"}})", ""));
  ASSERT_TRUE(ok.isOk()) << ok.status().toString();
  EXPECT_TRUE(ok->tensors.empty());
}

// A deterministic mini-fuzz: mutated valid files must give OK or an error, never crash.
TEST(Safetensors, MutatedFilesNeverCrash) {
  std::vector<StTensor> ts = {{"a", "F32", {2, 2}, testutil::floatData(DType::kF32, 4)},
                              {"b", "BF16", {3}, testutil::floatData(DType::kBF16, 3)}};
  const std::string good = makeSafetensors(ts);
  std::mt19937 rng(1234);
  int ok = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string m = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % m.size();
      switch (rng() % 4) {
        case 0:
          m[pos] = static_cast<char>(rng());
          break;
        case 1:
          m.erase(pos, 1 + rng() % 8);
          break;
        case 2:
          m.insert(pos, 1, "0123456789[]{},:\"-eE."[rng() % 21]);
          break;
        case 3:
          m.resize(pos);
          break;
      }
      if (m.empty()) break;
    }
    auto h = parseBytes(m);
    if (h.isOk()) {
      ++ok;
      for (const auto& t : h->tensors) {
        EXPECT_LE(t.end, h->data_bytes);
        EXPECT_EQ(t.nbytes(), static_cast<uint64_t>(t.shape.numel()) * dtypeSize(t.dtype));
      }
    } else {
      EXPECT_FALSE(h.status().message().empty());
    }
  }
  EXPECT_GT(ok, 0);  // some mutations (e.g. in the data) stay valid
}

}  // namespace
}  // namespace llmrt
