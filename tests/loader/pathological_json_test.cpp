// Pathological JSON in every loader parser (config.json, generation_config.json,
// safetensors headers, model.safetensors.index.json): nesting 75,000 deep,
// inputs of 1 MB and more (huge arrays, long strings, long names, many keys).
// Each must give a short one-line error (or parse), never a crash: printing a
// deeply nested value recursively used to overflow the stack (SIGSEGV).
#include <gtest/gtest.h>

#include <cstdio>

#include "loader/config_parser.h"
#include "loader/model_directory.h"
#include "loader/safetensors.h"
#include "loader/weight_store.h"
#include "loader_test_util.h"

namespace llmrt {
namespace {

using testutil::Json;
using testutil::TempDir;
using testutil::tinyConfig;
using testutil::writeFile;

constexpr size_t kOneMiB = size_t{1} << 20;
constexpr size_t kMaxMessage = 1000;

std::string nestedArrays(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string nestedObjects(size_t depth) {
  std::string s;
  s.reserve(depth * 7);
  for (size_t i = 0; i < depth; ++i) s += "{\"k\":";
  s += "1";
  s.append(depth, '}');
  return s;
}

// tinyConfig with `key` replaced by raw JSON text `value` (spliced in as text:
// the point is that the value is never built as a DOM here).
std::string configWith(const std::string& key, const std::string& value) {
  Json j = tinyConfig("llama");
  j.erase(key);
  std::string s = j.dump();
  s.pop_back();  // '}'
  return s + ",\"" + key + "\":" + value + "}";
}

std::string hugeArray(const std::string& element, size_t min_bytes) {
  std::string s = "[";
  while (s.size() < min_bytes) {
    if (s.size() > 1) s += ',';
    s += element;
  }
  return s + "]";
}

template <typename R>
void expectShortError(const R& r, const std::string& fragment) {
  ASSERT_FALSE(r.isOk()) << "expected an error";
  const std::string& m = testutil::statusOf(r).message();
  EXPECT_NE(m.find(fragment), std::string::npos) << "lacks \"" << fragment << "\": " << m.substr(0, 2000);
  EXPECT_EQ(m.find('\n'), std::string::npos) << "not one line: " << m.substr(0, 2000);
  EXPECT_LE(m.size(), kMaxMessage) << m.substr(0, 2000);
}

std::string safetensorsWithHeader(const std::string& header) {
  return testutil::makeSafetensorsRaw(header, "");
}

Result<SafetensorsHeader> parseSt(const std::string& bytes) {
  return parseSafetensors(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
      "big.safetensors");
}

TEST(PathologicalJson, ConfigNested75000Deep) {
  // The reported input: a 150 KB value nested 75,000 deep in a field the parser prints.
  const std::string text = configWith("architectures", nestedArrays(75000));
  ASSERT_GE(text.size(), 150000u);
  expectShortError(parseModelConfig(text, "config.json"), "config.json: nesting deeper than 64 levels");
  expectShortError(parseModelConfig(configWith("rope_scaling", nestedObjects(75000)), "config.json"),
                   "nesting deeper than 64 levels at rope_scaling.k.k.k");
  // At the limit it parses and the error names the field with a bounded snippet.
  auto at_limit = parseModelConfig(configWith("architectures", nestedArrays(63)), "config.json");
  ASSERT_FALSE(at_limit.isOk());
  EXPECT_EQ(at_limit.status().message(), "config.json: field 'architectures' has value " +
                                             std::string(9, '[') + "..." + std::string(9, ']') +
                                             "; expected a non-empty list of architecture names");
}

TEST(PathologicalJson, ConfigOneMegabyte) {
  const std::string deep = configWith("eos_token_id", nestedArrays(kOneMiB / 2));
  ASSERT_GE(deep.size(), kOneMiB);
  expectShortError(parseModelConfig(deep, "config.json"), "nesting deeper than 64 levels");

  const std::string wide = configWith("eos_token_id", hugeArray("\"x\"", kOneMiB));
  ASSERT_GE(wide.size(), kOneMiB);
  expectShortError(parseModelConfig(wide, "config.json"), "field 'eos_token_id' has value [\"x\",\"x\",");

  const std::string long_string = configWith("model_type", "\"" + std::string(kOneMiB, 'q') + "\"");
  expectShortError(parseModelConfig(long_string, "config.json"), "field 'model_type' has value \"qqqq");

  // Many distinct keys are not an error: a megabyte of unknown fields is ignored.
  Json j = tinyConfig("llama");
  std::string many = j.dump();
  many.pop_back();
  for (int i = 0; many.size() < kOneMiB; ++i) many += ",\"unknown_field_" + std::to_string(i) + "\":[1,2]";
  many += "}";
  auto ok = parseModelConfig(many, "config.json");
  ASSERT_TRUE(ok.isOk()) << ok.status().message().substr(0, 500);
  EXPECT_EQ(ok->vocab_size, 32);

  // A duplicate key keeps its last value, as transformers' json.load does.
  std::string twice = tinyConfig("llama").dump();
  twice.pop_back();
  twice += ",\"vocab_size\":64}";
  auto last = parseModelConfig(twice, "config.json");
  ASSERT_TRUE(last.isOk()) << last.status().toString();
  EXPECT_EQ(last->vocab_size, 64);
}

TEST(PathologicalJson, GenerationConfig) {
  expectShortError(parseGenerationConfig("{\"eos_token_id\":" + nestedArrays(75000) + "}"),
                   "generation_config.json: nesting deeper than 64 levels");
  expectShortError(parseGenerationConfig(nestedObjects(kOneMiB / 5)), "nesting deeper than 64 levels");
  expectShortError(parseGenerationConfig("{\"eos_token_id\":" + hugeArray("[1]", kOneMiB) + "}"),
                   "field 'eos_token_id' has value [[1],[1],");
  expectShortError(parseGenerationConfig("{\"temperature\":\"" + std::string(kOneMiB, 't') + "\"}"),
                   "field 'temperature' has value \"tttt");
  expectShortError(parseGenerationConfig(hugeArray("1.5", kOneMiB)), "expected a JSON object; got [1.5,1.5,");
  auto last = parseGenerationConfig(R"({"top_k": 5, "top_k": 7})");
  ASSERT_TRUE(last.isOk());
  EXPECT_EQ(last->top_k, std::optional<int64_t>(7));
}

TEST(PathologicalJson, SafetensorsHeaders) {
  expectShortError(parseSt(safetensorsWithHeader("{\"w\":" + nestedArrays(75000) + "}")),
                   "big.safetensors: safetensors header: nesting deeper than 16 levels");
  expectShortError(parseSt(safetensorsWithHeader(nestedObjects(kOneMiB / 5))),
                   "nesting deeper than 16 levels");

  // A 1 MB tensor name (with a newline in it) in a bad entry: named, but cut and escaped.
  const std::string name = "a\\nb" + std::string(kOneMiB, 'n');
  auto long_name = parseSt(
      safetensorsWithHeader("{\"" + name + "\":{\"dtype\":\"Q4\",\"shape\":[],\"data_offsets\":[0,0]}}"));
  expectShortError(long_name, "big.safetensors: tensor 'a\\nbnnnn");
  expectShortError(long_name, "...'");
  // A shape of 300,000 dimensions, and offsets as a huge array.
  expectShortError(parseSt(safetensorsWithHeader("{\"w\":{\"dtype\":\"F32\",\"shape\":" +
                                                 hugeArray("1", kOneMiB) + ",\"data_offsets\":[0,4]}}")),
                   "at most " + std::to_string(kMaxTensorRank) + " dimensions");
  expectShortError(parseSt(safetensorsWithHeader("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":" +
                                                 hugeArray("0", kOneMiB) + "}}")),
                   "field 'data_offsets' has value [0,0,0,");
  // __metadata__ with a long key and a non-string value.
  expectShortError(parseSt(safetensorsWithHeader("{\"__metadata__\":{\"" + std::string(kOneMiB, 'm') +
                                                 "\":" + hugeArray("2", 4000) + "}}")),
                   "field '__metadata__.mmmm");
  // A duplicate tensor name at the end of a 1 MB header is still found. (Long
  // names keep the entry count near 2,000: nlohmann's callback parser, which
  // core's parseJson uses today, is quadratic in the entries of an object.)
  const std::string pad(480, 'p');
  std::string header = "{";
  int i = 0;
  for (; header.size() < kOneMiB; ++i) {
    header +=
        "\"t" + std::to_string(i) + pad + "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},";
  }
  auto valid = parseSt(safetensorsWithHeader(header + "\"t0" + pad +
                                             "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}"));
  expectShortError(valid, "safetensors header: duplicate key 't0pppp");
  header.back() = '}';
  auto many = parseSt(safetensorsWithHeader(header));
  ASSERT_TRUE(many.isOk()) << many.status().message().substr(0, 500);
  EXPECT_EQ(many->tensors.size(), static_cast<size_t>(i));
}

TEST(PathologicalJson, ShardIndex) {
  expectShortError(WeightStore::parseIndex("{\"weight_map\":" + nestedArrays(75000) + "}", "m.index.json"),
                   "m.index.json: nesting deeper than 64 levels");
  expectShortError(WeightStore::parseIndex("{\"weight_map\":{\"" + std::string(kOneMiB, 'w') +
                                               "\":" + hugeArray("3", 5000) + "}}",
                                           "m.index.json"),
                   "field 'weight_map.wwww");
  expectShortError(
      WeightStore::parseIndex("{\"weight_map\":" + hugeArray("\"s\"", kOneMiB) + "}", "m.index.json"),
      "field 'weight_map' has value [\"s\",\"s\",");
}

TEST(PathologicalJson, ModelDirectoryFiles) {
  TempDir tmp;
  testutil::writeModelDir(tmp.path(), tinyConfig("llama"));
  writeFile(tmp.file("generation_config.json"), "{\"eos_token_id\":" + nestedArrays(kOneMiB / 2) + "}");
  expectShortError(ModelDirectory::open(tmp.path()),
                   tmp.file("generation_config.json") + ": nesting deeper than 64");
  std::remove(tmp.file("generation_config.json").c_str());
  writeFile(tmp.file("config.json"), configWith("architectures", nestedArrays(75000)));
  expectShortError(ModelDirectory::open(tmp.path()), tmp.file("config.json") + ": nesting deeper than 64");
  writeFile(tmp.file("config.json"), configWith("quantization_config", nestedObjects(70)));
  expectShortError(ModelDirectory::open(tmp.path()),
                   "nesting deeper than 64 levels at quantization_config.k");
}

}  // namespace
}  // namespace llmrt
