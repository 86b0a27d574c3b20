// The extension module llmrt._llmrt: the C++ LLM API (include/llmrt/llm.h) for the pure-Python
// layer (python/llmrt/_api.py), which is what users import (`from llmrt import LLM`).
//
// Threads and signals:
//   1. every call that may block (engine start, tokenization, waiting for tokens, shutdown)
//      releases the GIL, so other Python threads run meanwhile and several threads may generate
//      at once (the LLM is thread-safe);
//   2. waits run in slices of kWaitSlice; between slices the waiting thread takes the GIL and
//      runs Python's signal handlers, and when one raises (Ctrl-C: KeyboardInterrupt) the call
//      cancels the requests it waits for, waits until they have ended and re-raises;
//   3. no engine thread ever calls into Python: progress is reported by the waiting thread.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "convert.h"
#include "llmrt/config_options.h"
#include "llmrt/llm.h"

namespace llmrt::python {
namespace {

constexpr std::chrono::milliseconds kWaitSlice{20};

// One request in flight (LLM::generateAsync). Holds the engine so that it outlives its requests.
class PyRequest {
 public:
  PyRequest(std::shared_ptr<LLM> llm, std::unique_ptr<GenerationResult> r)
      : llm_(std::move(llm)), r_(std::move(r)) {}

  uint64_t id() const { return r_->id(); }
  bool finished() const { return r_->finished(); }
  void abort() { r_->abort(); }

  // Waits up to `timeout_s` (None: until the end; Ctrl-C cancels); true once ended.
  bool wait(std::optional<double> timeout_s) {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(timeout_s.value_or(0.0)));
    for (;;) {
      bool done;
      {
        py::gil_scoped_release nogil;
        done = r_->wait(kWaitSlice);
      }
      if (done) return true;
      if (PyErr_CheckSignals() != 0) {
        cancelAndWait();
        throw py::error_already_set();
      }
      if (timeout_s && std::chrono::steady_clock::now() >= until) return false;
    }
  }

  // The next streamed piece as (completion, token_ids, text, finish_reason or None); None once the
  // request has ended and every piece was taken; False when `timeout_s` passed first.
  py::object next(std::optional<double> timeout_s) {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(timeout_s.value_or(0.0)));
    for (;;) {
      StreamDelta delta;
      bool got, timed_out = false;
      {
        py::gil_scoped_release nogil;
        got = r_->next(delta, kWaitSlice, &timed_out);
      }
      if (got) return streamDeltaTuple(delta);
      if (!timed_out) return py::none();
      if (PyErr_CheckSignals() != 0) {
        cancelAndWait();
        throw py::error_already_set();
      }
      if (timeout_s && std::chrono::steady_clock::now() >= until) return py::bool_(false);
    }
  }

  // The whole output (waits for the end first).
  py::dict result() {
    wait(std::nullopt);
    RequestOutput out;
    {
      py::gil_scoped_release nogil;
      out = r_->result();
    }
    return requestOutputDict(std::move(out), llm_->modelConfig().vocab_size);
  }

  // One slice of waiting, the GIL released; true once ended.
  bool waitSlice() {
    py::gil_scoped_release nogil;
    return r_->wait(kWaitSlice);
  }

  // Cancels and waits for the end without checking signals (the one already raised is pending).
  void cancelAndWait() {
    r_->abort();
    py::gil_scoped_release nogil;
    r_->result();
  }

 private:
  std::shared_ptr<LLM> llm_;
  std::unique_ptr<GenerationResult> r_;
};

// Waits for every request; calls on_finished(i) (when not None) as request i ends. Ctrl-C
// cancels them all, waits for their end and re-raises.
void waitAll(const std::vector<PyRequest*>& reqs, const py::object& on_finished) {
  std::vector<char> seen(reqs.size(), 0);
  size_t done = 0;
  auto collect = [&] {
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (seen[i] || !reqs[i]->finished()) continue;
      seen[i] = 1;
      ++done;
      if (!on_finished.is_none()) on_finished(i);
    }
  };
  collect();
  while (done < reqs.size()) {
    size_t oldest = 0;
    while (seen[oldest]) ++oldest;
    reqs[oldest]->waitSlice();
    if (PyErr_CheckSignals() != 0) {
      for (PyRequest* r : reqs) r->abort();
      for (PyRequest* r : reqs) r->cancelAndWait();
      throw py::error_already_set();
    }
    collect();
  }
}

class PyLLM {
 public:
  explicit PyLLM(const std::vector<std::pair<std::string, std::string>>& options) {
    const EngineConfig config = engineConfigFrom(options);
    Result<std::unique_ptr<LLM>> llm = internalError("unset");
    {
      py::gil_scoped_release nogil;
      llm = LLM::create(config);
    }
    llm_ = std::shared_ptr<LLM>(unwrap(std::move(llm)).release());
  }

  std::shared_ptr<LLM> get() const {
    if (!llm_) throw std::runtime_error("LLM: the engine was shut down (shutdown() or the with-block ended)");
    return llm_;
  }

  // Validates and submits one prompt (str: tokenized with special tokens; list of ids: as is).
  std::unique_ptr<PyRequest> submit(const py::object& prompt, const py::dict& sampling, const py::dict& options) {
    auto llm = get();
    const SamplingParams sp = samplingParamsFrom(sampling);
    check(sp.validate(llm->modelConfig().vocab_size));
    const RequestOptions ro = requestOptionsFrom(options);
    if (ro.kv_cache_retention_config) check(ro.kv_cache_retention_config->validate());
    Prompt p = py::isinstance<py::str>(prompt) ? Prompt::fromText(prompt.cast<std::string>())
                                               : Prompt::fromIds(prompt.cast<std::vector<TokenId>>());
    Result<std::unique_ptr<GenerationResult>> r = internalError("unset");
    {
      py::gil_scoped_release nogil;
      r = llm->generateAsync(p, sp, ro);
    }
    return std::make_unique<PyRequest>(llm, unwrap(std::move(r)));
  }

  py::list encode(const std::string& text, bool add_special_tokens) {
    const Tokenizer* t = tokenizer();
    Result<std::vector<TokenId>> ids = internalError("unset");
    {
      py::gil_scoped_release nogil;
      ids = t->encode(text, add_special_tokens);
    }
    return py::cast(unwrap(std::move(ids)));
  }

  std::string decode(const std::vector<TokenId>& ids, bool skip_special_tokens) {
    const Tokenizer* t = tokenizer();
    py::gil_scoped_release nogil;
    return t->decode(ids, skip_special_tokens);
  }

  bool hasTokenizer() const { return get()->tokenizer() != nullptr; }

  py::dict modelConfig() const {
    const ModelConfig& c = get()->modelConfig();
    py::dict d;
    d["architecture"] = c.architecture;
    d["model_type"] = c.model_type;
    d["vocab_size"] = c.vocab_size;
    d["hidden_size"] = c.hidden_size;
    d["num_hidden_layers"] = c.num_hidden_layers;
    d["num_attention_heads"] = c.num_attention_heads;
    d["num_key_value_heads"] = c.num_key_value_heads;
    d["head_dim"] = c.head_dim;
    d["max_position_embeddings"] = c.max_position_embeddings;
    return d;
  }

  py::dict config() const { return engineConfigValues(get()->executor().config()); }
  py::dict stats() const { return llmStatsDict(get()->stats()); }

  py::list iterationStats() {
    auto llm = get();
    std::vector<IterationStats> s;
    {
      py::gil_scoped_release nogil;
      s = llm->executor().getLatestIterationStats();
    }
    py::list out;
    for (const IterationStats& i : s) out.append(iterationStatsDict(i));
    return out;
  }

  py::list kvCacheEvents(std::optional<double> timeout_s) {
    auto llm = get();
    std::vector<KvCacheEvent> events;
    {
      py::gil_scoped_release nogil;
      events = llm->getKvCacheEvents(std::chrono::milliseconds(
          static_cast<int64_t>(timeout_s.value_or(0.0) * 1e3)));
    }
    py::list out;
    for (const KvCacheEvent& e : events) out.append(kvCacheEventDict(e));
    return out;
  }

  // Stops the engine: unfinished requests end cancelled; later calls raise. Idempotent.
  void shutdown() {
    if (!llm_) return;
    std::shared_ptr<LLM> llm = std::move(llm_);
    py::gil_scoped_release nogil;
    llm->executor().shutdown();
    llm.reset();  // the engine itself goes with the last request holding it
  }

 private:
  const Tokenizer* tokenizer() const {
    const Tokenizer* t = get()->tokenizer();
    if (!t) throw std::runtime_error("LLM: the model directory has no tokenizer; pass token ids");
    return t;
  }

  std::shared_ptr<LLM> llm_;
};

py::list optionTable() {
  py::list out;
  for (const OptionInfo& o : engineOptionTable()) {
    static const char* kKinds[] = {"bool", "int", "float", "string", "enum", "int_list", "string_list"};
    out.append(py::make_tuple(std::string(o.key), std::string(o.flag), kKinds[static_cast<int>(o.kind)],
                              std::string(o.value_name), std::string(o.help)));
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_llmrt, m) {
  m.doc() = "llmrt's C++ LLM API; import llmrt (python/llmrt) rather than this module";
  m.attr("__version__") = LLMRT_VERSION;
  m.def("engine_option_table", &optionTable,
        "The engine options as (key, flag, kind, value_name, help) tuples (llmrt/config_options.h)");
  m.def(
      "engine_config",
      [](const std::vector<std::pair<std::string, std::string>>& options) {
        return engineConfigValues(engineConfigFrom(options));
      },
      "Sets (key, value) options through the option table, validates, returns every key's value");
  m.def(
      "sampling_params",
      [](const py::dict& fields) {
        const SamplingParams p = samplingParamsFrom(fields);
        check(p.validate());
        return samplingParamsDict(p);
      },
      "Builds and validates a C++ SamplingParams from field values; returns all its fields");

  py::class_<PyRequest>(m, "Request")
      .def_property_readonly("id", &PyRequest::id)
      .def_property_readonly("finished", &PyRequest::finished)
      .def("abort", &PyRequest::abort)
      .def("wait", &PyRequest::wait, py::arg("timeout") = py::none())
      .def("next", &PyRequest::next, py::arg("timeout") = py::none())
      .def("result", &PyRequest::result);

  m.def("wait_all", &waitAll, py::arg("requests"), py::arg("on_finished") = py::none());

  py::class_<PyLLM>(m, "Engine")
      .def(py::init<const std::vector<std::pair<std::string, std::string>>&>(), py::arg("options"))
      .def("submit", &PyLLM::submit, py::arg("prompt"), py::arg("sampling"), py::arg("options"))
      .def("encode", &PyLLM::encode, py::arg("text"), py::arg("add_special_tokens") = true)
      .def("decode", &PyLLM::decode, py::arg("ids"), py::arg("skip_special_tokens") = true)
      .def_property_readonly("has_tokenizer", &PyLLM::hasTokenizer)
      .def("model_config", &PyLLM::modelConfig)
      .def("config", &PyLLM::config)
      .def("stats", &PyLLM::stats)
      .def("iteration_stats", &PyLLM::iterationStats)
      .def("kv_cache_events", &PyLLM::kvCacheEvents, py::arg("timeout") = py::none())
      .def("shutdown", &PyLLM::shutdown);
}

}  // namespace llmrt::python
