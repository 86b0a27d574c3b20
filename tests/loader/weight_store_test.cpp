#include "loader/weight_store.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/logging.h"
#include "loader/config_parser.h"
#include "loader_test_util.h"

namespace llmrt {
namespace {

using testutil::Json;
using testutil::makeSafetensors;
using testutil::StTensor;
using testutil::TempDir;
using testutil::writeFile;

std::vector<StTensor> someTensors() {
  return {{"a.weight", "F32", {2, 3}, testutil::floatData(DType::kF32, 6)},
          {"b.weight", "BF16", {4}, testutil::floatData(DType::kBF16, 4, 0.5f)},
          {"c.bias", "F16", {3}, testutil::floatData(DType::kF16, 3, 1.0f)},
          {"d.ids", "I64", {2}, testutil::bytesOf(std::vector<int64_t>{7, 8})}};
}

TEST(WeightStore, SingleFile) {
  TempDir tmp;
  writeFile(tmp.file("model.safetensors"), makeSafetensors(someTensors()));
  auto s = WeightStore::openDirectory(tmp.path());
  ASSERT_TRUE(s.isOk()) << s.status().toString();
  EXPECT_EQ(s->source(), tmp.file("model.safetensors"));
  EXPECT_EQ(s->names(), (std::vector<std::string>{"a.weight", "b.weight", "c.bias", "d.ids"}));
  EXPECT_EQ(s->size(), 4u);
  EXPECT_EQ(s->totalBytes(), 24u + 8u + 6u + 16u);
  EXPECT_EQ(s->totalParameters(), 6 + 4 + 3 + 2);
  EXPECT_EQ(s->bytesByDtype().at(DType::kF32), 24u);
  EXPECT_EQ(s->files().size(), 1u);
  EXPECT_TRUE(s->contains("c.bias"));
  EXPECT_FALSE(s->contains("c"));

  auto t = s->tensor("a.weight");
  ASSERT_TRUE(t.isOk());
  EXPECT_EQ(t->shape, (Shape{2, 3}));
  const SafetensorsFile& f = s->files()[0];
  EXPECT_EQ(static_cast<const uint8_t*>(t->data),
            f.mappedData() + f.header().data_offset + f.find("a.weight")->begin);
  float v[6];
  std::memcpy(v, t->data, sizeof(v));
  EXPECT_FLOAT_EQ(v[0], -0.75f);  // 0.25 * (0 - 3)
  EXPECT_FLOAT_EQ(v[5], 0.5f);

  // Views stay valid after the store is moved (the mapping does not move).
  WeightStore moved = std::move(*s);
  auto t2 = moved.tensor("a.weight");
  ASSERT_TRUE(t2.isOk());
  EXPECT_EQ(t2->data, t->data);

  EXPECT_ERROR_CONTAINS(moved.tensor("zzz"), "model.safetensors", "no tensor named 'zzz'");
}

TEST(WeightStore, Sharded) {
  TempDir tmp;
  std::vector<StTensor> all = someTensors();
  writeFile(tmp.file("s1.safetensors"), makeSafetensors({all[0], all[1]}));
  writeFile(tmp.file("s2.safetensors"), makeSafetensors({all[2], all[3]}));
  Json index = {{"metadata", {{"total_size", 54}}},
                {"weight_map",
                 {{"a.weight", "s1.safetensors"},
                  {"b.weight", "s1.safetensors"},
                  {"c.bias", "s2.safetensors"},
                  {"d.ids", "s2.safetensors"}}}};
  writeFile(tmp.file("model.safetensors.index.json"), index.dump());
  auto s = WeightStore::openDirectory(tmp.path());
  ASSERT_TRUE(s.isOk()) << s.status().toString();
  EXPECT_EQ(s->source(), tmp.file("model.safetensors.index.json"));
  EXPECT_EQ(s->files().size(), 2u);
  EXPECT_EQ(s->size(), 4u);
  EXPECT_EQ(s->totalBytes(), 54u);
  EXPECT_EQ(s->find("c.bias")->shard, 1u);
  EXPECT_EQ(s->files()[s->find("c.bias")->shard].path(), tmp.file("s2.safetensors"));
  int64_t ids[2];
  std::memcpy(ids, s->tensor("d.ids")->data, sizeof(ids));
  EXPECT_EQ(ids[1], 8);

  // A tensor a shard holds but the index does not list is left out (with a warning).
  Json partial = index;
  partial["weight_map"].erase("d.ids");
  writeFile(tmp.file("model.safetensors.index.json"), partial.dump());
  std::vector<std::string> logged;
  LogSink old = setLogSink([&](LogLevel, std::string_view l) { logged.emplace_back(l); });
  auto p = WeightStore::openIndex(tmp.file("model.safetensors.index.json"));
  setLogSink(old);
  ASSERT_TRUE(p.isOk()) << p.status().toString();
  EXPECT_FALSE(p->contains("d.ids"));
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].find("'d.ids'"), std::string::npos) << logged[0];
}

TEST(WeightStore, ShardedErrors) {
  TempDir tmp;
  std::vector<StTensor> all = someTensors();
  writeFile(tmp.file("s1.safetensors"), makeSafetensors({all[0], all[1]}));
  const std::string index_path = tmp.file("model.safetensors.index.json");
  auto open_with = [&](const std::string& text) {
    writeFile(index_path, text);
    return WeightStore::openDirectory(tmp.path());
  };
  auto missing_shard =
      open_with(R"({"weight_map": {"a.weight": "s1.safetensors", "c.bias": "s9.safetensors"}})");
  EXPECT_ERROR_CONTAINS(missing_shard, "model.safetensors.index.json", "'c.bias'", "shard 's9.safetensors'",
                        "does not exist");
  EXPECT_EQ(missing_shard.status().code(), StatusCode::kNotFound);
  auto not_in_shard =
      open_with(R"({"weight_map": {"a.weight": "s1.safetensors", "c.bias": "s1.safetensors"}})");
  EXPECT_ERROR_CONTAINS(not_in_shard, "model.safetensors.index.json", "lists tensor 'c.bias'",
                        "shard 's1.safetensors'", "does not contain it");
  EXPECT_ERROR_CONTAINS(open_with("{\"weight_map\": "), "model.safetensors.index.json", "invalid JSON");
  EXPECT_ERROR_CONTAINS(open_with("{}"), "model.safetensors.index.json", "missing field 'weight_map'");
  EXPECT_ERROR_CONTAINS(open_with(R"({"weight_map": []})"), "'weight_map' has value []", "non-empty object");
  EXPECT_ERROR_CONTAINS(open_with(R"({"weight_map": {}})"), "'weight_map' has value {}");
  EXPECT_ERROR_CONTAINS(open_with(R"({"weight_map": {"a.weight": 3}})"), "'weight_map.a.weight' has value 3",
                        "a shard file name");
  EXPECT_ERROR_CONTAINS(open_with(R"({"weight_map": {"a.weight": "../s1.safetensors"}})"),
                        "'weight_map.a.weight' has value \"../s1.safetensors\"", "no '..'");
  EXPECT_ERROR_CONTAINS(open_with(R"({"weight_map": {"a.weight": "/etc/passwd"}})"), "not absolute");
  EXPECT_ERROR_CONTAINS(open_with("[1]"), "expected a JSON object");
  // A shard that is itself broken: its own error, naming the shard.
  writeFile(tmp.file("bad.safetensors"), "xx");
  EXPECT_ERROR_CONTAINS(open_with(R"({"weight_map": {"a.weight": "bad.safetensors"}})"), "bad.safetensors",
                        "too small");
}

// A shard cut short (a download that stopped, a file being rewritten): every
// tensor's byte range is checked against the file size when the file is opened,
// so reading a mapped tensor never runs past the end of the file (SIGBUS).
TEST(WeightStore, TruncatedShardIsRefusedAtOpen) {
  TempDir tmp;
  std::vector<StTensor> all = someTensors();
  writeFile(tmp.file("s1.safetensors"), makeSafetensors({all[0], all[1]}));
  const std::string s2 = makeSafetensors({all[2], all[3]});
  writeFile(tmp.file("s2.safetensors"), s2.substr(0, s2.size() - 3));
  writeFile(tmp.file("model.safetensors.index.json"),
            R"({"weight_map": {"a.weight": "s1.safetensors", "b.weight": "s1.safetensors",
                               "c.bias": "s2.safetensors", "d.ids": "s2.safetensors"}})");
  auto s = WeightStore::openDirectory(tmp.path());
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.status().code(), StatusCode::kOutOfRange);
  const uint64_t file_size = s2.size() - 3;
  EXPECT_ERROR_CONTAINS(
      s, tmp.file("s2.safetensors") + ": tensor 'd.ids'", "field 'data_offsets'",
      "end beyond the data: the file is " + std::to_string(file_size) + " bytes; truncated?");
  // Cut inside the first tensor of the file: that tensor is named.
  writeFile(tmp.file("s2.safetensors"), s2.substr(0, s2.size() - 18));
  EXPECT_ERROR_CONTAINS(WeightStore::openDirectory(tmp.path()), "tensor 'c.bias'", "truncated?");
}

TEST(WeightStore, MissingWeights) {
  TempDir tmp;
  auto s = WeightStore::openDirectory(tmp.path());
  EXPECT_ERROR_CONTAINS(s, tmp.path(), "no model.safetensors or model.safetensors.index.json");
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_ERROR_CONTAINS(WeightStore::openFile(tmp.file("x.safetensors")), "x.safetensors", "cannot open");
  EXPECT_ERROR_CONTAINS(WeightStore::openIndex(tmp.file("i.json")), "i.json", "cannot open");
}

TEST(WeightStore, SingleFileWinsOverIndex) {
  TempDir tmp;
  writeFile(tmp.file("model.safetensors"), makeSafetensors(someTensors()));
  writeFile(tmp.file("model.safetensors.index.json"), "not even json");  // as HF: single file first
  auto s = WeightStore::openDirectory(tmp.path());
  ASSERT_TRUE(s.isOk()) << s.status().toString();
  EXPECT_EQ(s->source(), tmp.file("model.safetensors"));
}

}  // namespace
}  // namespace llmrt
