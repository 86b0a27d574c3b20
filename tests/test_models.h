// The trained models the end-to-end tests run on, and where the shared test data lives.
//  - stories260K-hf: a third-party 260K-parameter TinyStories Llama in ../shared/testdata (absent in a
//    fresh clone); fast; float64 greedy references in ../shared/testdata/references.
//  - llmrt-tiny: the repository's own 12.6M-parameter Llama (models/llmrt-tiny), in every clone; about
//    15x slower through the executor on the CPU; HF transformers' greedy outputs in its golden.json.
// Suites that need "some trained model" run on stories260K when it is present and on llmrt-tiny
// otherwise (proofModel(); LLMRT_TEST_MODEL=shared|bundled picks one); suites that are cheap on
// llmrt-tiny run on both (trainedModels()). Exact outputs always come from the model's own reference.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace llmrt::testmodels {

// ../shared/testdata; the environment's LLMRT_SHARED_TESTDATA (a GPU machine's copy) overrides the
// build's path.
inline std::string sharedTestdata() {
  const char* env = std::getenv("LLMRT_SHARED_TESTDATA");
  return env && *env ? std::string(env) : std::string(LLMRT_SHARED_TESTDATA);
}

// The skip message of every test that needs ../shared/testdata (scripts/ctest_skips.py groups by it).
inline std::string sharedAbsent(const std::string& path) { return "shared test data absent: " + path; }

// models/llmrt-tiny of the source tree (or of the current directory: a device machine's copy of the tree).
inline std::string bundledDir() {
  const std::string built = std::string(LLMRT_SOURCE_DIR) + "/models/llmrt-tiny";
  if (!std::filesystem::exists(built) && std::filesystem::exists("models/llmrt-tiny/config.json"))
    return "models/llmrt-tiny";
  return built;
}

// A greedy continuation computed by an independent implementation (prompt_ids start with BOS).
struct ReferenceCase {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> new_ids;
  std::string new_text;
};

struct TrainedModel {
  std::string name;  // directory name, also the test parameter's name
  std::string dir;
  bool bundled = false;
  int32_t bos = 0;
  int32_t vocab_size = 0;
  uint64_t kv_f32_bytes_per_token = 0;  // layers x 2 x kv heads x head_dim x 4: the CPU's cache
  std::vector<ReferenceCase> cases;     // greedy references, max_tokens new tokens each, EOS ignored
  // A word of cases[0].new_text (a stop string that ends cases[0]'s continuation early).
  std::string stop_word;
  // Punctuation ids ("," and "."): greedy continuations of arbitrary prompts soon produce one.
  std::vector<int32_t> punctuation_ids;

  const ReferenceCase& first() const { return cases.at(0); }
  uint64_t kvBlockBytes(int32_t tokens_per_block) const {
    return kv_f32_bytes_per_token * static_cast<uint64_t>(tokens_per_block);
  }
};

inline void PrintTo(const TrainedModel& m, std::ostream* os) { *os << m.name; }

namespace detail {

inline nlohmann::json readJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "cannot open " << path;
    return nlohmann::json();
  }
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const std::exception& e) {
    ADD_FAILURE() << path << ": " << e.what();
    return nlohmann::json();
  }
}

// golden.json (new_text) and the shared references (output_text = prompt + new text) alike.
inline std::vector<ReferenceCase> readCases(const std::string& path) {
  std::vector<ReferenceCase> out;
  const nlohmann::json j = readJson(path);
  if (!j.contains("cases")) {
    ADD_FAILURE() << path << ": no \"cases\"";
    return out;
  }
  for (const auto& c : j["cases"]) {
    ReferenceCase r;
    r.prompt = c["prompt"].get<std::string>();
    r.prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
    r.new_ids = c["new_ids"].get<std::vector<int32_t>>();
    if (c.contains("new_text")) {
      r.new_text = c["new_text"].get<std::string>();
    } else {
      const std::string full = c["output_text"].get<std::string>();
      EXPECT_EQ(full.rfind(r.prompt, 0), 0u) << path << ": output_text does not start with the prompt";
      r.new_text = full.substr(std::min(full.size(), r.prompt.size()));
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace detail

inline std::string storiesDir() { return sharedTestdata() + "/models/stories260K-hf"; }
inline bool haveStories() { return std::filesystem::exists(storiesDir() + "/config.json"); }

// stories260K-hf (5 layers, 4 KV heads of 8, vocabulary 512, BOS 1); nullopt without ../shared.
inline std::optional<TrainedModel> stories() {
  if (!haveStories()) return std::nullopt;
  static const TrainedModel m = [] {
    TrainedModel t;
    t.name = "stories260K_hf";
    t.dir = storiesDir();
    t.bos = 1;
    t.vocab_size = 512;
    t.kv_f32_bytes_per_token = 5 * 2 * 4 * 8 * 4;
    t.cases = detail::readCases(sharedTestdata() + "/references/stories260K-hf.greedy.json");
    t.stop_word = "Lily";            // ", there was a little girl named Lily. ..."
    t.punctuation_ids = {432, 378};  // "," "."
    return t;
  }();
  return m;
}

// llmrt-tiny (6 layers, 2 KV heads of 64, vocabulary 8192, BOS 0); always present.
inline const TrainedModel& bundled() {
  static const TrainedModel m = [] {
    TrainedModel t;
    t.name = "llmrt_tiny";
    t.dir = bundledDir();
    t.bundled = true;
    t.bos = 0;
    t.vocab_size = 8192;
    t.kv_f32_bytes_per_token = 6 * 2 * 2 * 64 * 4;
    t.cases = detail::readCases(t.dir + "/golden.json");
    t.stop_word = "help";          // " following functions are provided to help the user ..."
    t.punctuation_ids = {13, 15};  // "," "."
    return t;
  }();
  return m;
}

// The models a cheap suite runs on: both, stories260K first (skipped where absent: see requireModel).
inline std::vector<std::string> trainedModelNames() { return {"stories260K_hf", "llmrt_tiny"}; }

// nullopt (with *why set) when the named model's data is absent.
inline std::optional<TrainedModel> trainedModel(const std::string& name, std::string* why) {
  if (name == "llmrt_tiny") return bundled();
  auto s = stories();
  if (!s && why) *why = sharedAbsent(storiesDir());
  return s;
}

// The model of the suites that need one trained model: LLMRT_TEST_MODEL=shared (stories260K),
// bundled (llmrt-tiny) or auto (the default: stories260K when present, else llmrt-tiny).
// nullopt (with *why set) only when shared is asked for and absent.
inline std::optional<TrainedModel> proofModel(std::string* why) {
  const char* env = std::getenv("LLMRT_TEST_MODEL");
  const std::string want = env && *env ? env : "auto";
  if (want == "bundled") return bundled();
  if (want == "shared" || haveStories()) return trainedModel("stories260K_hf", why);
  return bundled();
}

// The TEST_P parameter name as a gtest name ("stories260K_hf").
inline std::string paramName(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

}  // namespace llmrt::testmodels

// In a test: the model named by the test's parameter, or a skip naming the absent shared data.
#define LLMRT_TRAINED_MODEL(var, name)                               \
  std::string var##_why;                                             \
  const std::optional<::llmrt::testmodels::TrainedModel> var##_opt = \
      ::llmrt::testmodels::trainedModel(name, &var##_why);           \
  if (!var##_opt) GTEST_SKIP() << var##_why;                         \
  const ::llmrt::testmodels::TrainedModel& var = *var##_opt
