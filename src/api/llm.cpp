// The LLM API on top of the Executor: prompts are tokenized here, requests are
// enqueued with a callback that assembles RequestOutputs (and forwards
// streamed tokens), and generate() waits for its own requests only, so calls
// from several threads share the executor's batches.
#include "llmrt/llm.h"

#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>

namespace llmrt {

// ---- shared assembly of one request's output ---------------------------------

namespace {

void applyResponse(RequestOutput& o, const Response& r) {
  if (!r.status.isOk() && o.status.isOk()) o.status = r.status;
  if (r.is_final && r.stats) {
    o.time_to_first_token_s = r.stats->time_to_first_token_s;
    o.total_time_s = r.stats->total_time_s;
  }
  o.cached_tokens = r.num_cached_tokens;
  if (!r.status.isOk() && r.new_tokens.empty()) return;
  if (o.outputs.size() <= static_cast<size_t>(r.sequence_index)) {
    const size_t old = o.outputs.size();
    o.outputs.resize(static_cast<size_t>(r.sequence_index) + 1);
    for (size_t i = old; i < o.outputs.size(); ++i) o.outputs[i].index = static_cast<int>(i);
  }
  CompletionOutput& c = o.outputs[static_cast<size_t>(r.sequence_index)];
  c.token_ids.insert(c.token_ids.end(), r.new_tokens.begin(), r.new_tokens.end());
  c.text += r.text;
  c.logprobs.insert(c.logprobs.end(), r.logprobs.begin(), r.logprobs.end());
  c.generation_logits.insert(c.generation_logits.end(), r.generation_logits.begin(), r.generation_logits.end());
  if (r.finish_reason != FinishReason::kNone) c.finish_reason = r.finish_reason;
  if (!r.context_logits.empty()) o.context_logits = r.context_logits;
}

}  // namespace

struct GenerationResult::State {
  std::mutex mu;
  std::condition_variable cv;
  RequestId id = 0;
  RequestOutput output;
  std::deque<StreamDelta> pieces;
  bool done = false;
};

GenerationResult::~GenerationResult() = default;
RequestId GenerationResult::id() const { return state_->id; }

bool GenerationResult::next(StreamDelta& out, std::optional<std::chrono::milliseconds> timeout, bool* timed_out) {
  std::unique_lock<std::mutex> lock(state_->mu);
  auto ready = [&] { return !state_->pieces.empty() || state_->done; };
  bool ok = true;
  if (timeout) ok = state_->cv.wait_for(lock, *timeout, ready);
  else state_->cv.wait(lock, ready);
  if (timed_out) *timed_out = !ok;
  if (state_->pieces.empty()) return false;
  out = std::move(state_->pieces.front());
  state_->pieces.pop_front();
  return true;
}

RequestOutput GenerationResult::result() {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  return state_->output;
}

bool GenerationResult::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu);
  return state_->cv.wait_for(lock, timeout, [&] { return state_->done; });
}

bool GenerationResult::finished() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

void GenerationResult::abort() {
  if (executor_) executor_->cancelRequest(state_->id);
}

// ---- LLM ------------------------------------------------------------------------

struct LLM::Impl {
  std::unique_ptr<Executor> executor;
};

LLM::LLM() : impl_(std::make_unique<Impl>()) {}
LLM::~LLM() = default;

Result<std::unique_ptr<LLM>> LLM::create(const LlmArgs& args) {
  std::unique_ptr<LLM> llm(new LLM());
  LLMRT_ASSIGN_OR_RETURN(llm->impl_->executor, Executor::create(args));  // validates once
  return llm;
}

const ModelConfig& LLM::modelConfig() const { return impl_->executor->modelConfig(); }
const Tokenizer* LLM::tokenizer() const { return impl_->executor->tokenizer(); }
SamplingParams LLM::defaultSamplingParams(SamplingParams base) const {
  return impl_->executor->defaultSamplingParams(std::move(base));
}
Executor& LLM::executor() { return *impl_->executor; }

std::vector<KvCacheEvent> LLM::getKvCacheEvents(std::optional<std::chrono::milliseconds> timeout) {
  return impl_->executor->getKvCacheEvents(timeout);
}

LlmStats LLM::stats() const {
  const ExecutorStats e = impl_->executor->stats();
  LlmStats s;
  s.steps = e.steps;
  s.pauses = e.pauses;
  s.resumes = e.resumes;
  s.context_tokens = e.context_tokens;
  s.generated_tokens = e.generated_tokens;
  s.seconds = e.busy_seconds;
  s.device_seconds = e.device_seconds;
  s.reused_blocks = e.kv_reused_blocks;
  s.missed_blocks = e.kv_missed_blocks;
  s.reuse_hit_rate = e.kv_reuse_hit_rate;
  s.evicted_blocks = e.kv_evicted_blocks;
  s.evicted_secondary_blocks = e.kv_evicted_secondary_blocks;
  s.offloaded_blocks = e.kv_offloaded_blocks;
  s.onboarded_blocks = e.kv_onboarded_blocks;
  return s;
}

namespace {

Result<std::vector<TokenId>> tokenize(const Executor& ex, const Prompt& p) {
  if (!p.text) return p.token_ids;
  if (ex.tokenizer() == nullptr)
    return failedPrecondition(
        "the model directory has no tokenizer (tokenizer.json, tokenizer.model, *.tiktoken); pass token ids");
  return ex.tokenizer()->encode(*p.text, true);
}

Request makeRequest(std::vector<TokenId> ids, const SamplingParams& sp, const RequestOptions& o) {
  Request r;
  r.input_token_ids = std::move(ids);
  r.sampling_params = sp;
  r.kv_cache_retention_config = o.kv_cache_retention_config;
  r.return_context_logits = o.return_context_logits;
  r.return_generation_logits = o.return_generation_logits;
  return r;
}

}  // namespace

Result<std::vector<RequestOutput>> LLM::generate(const std::vector<Prompt>& prompts,
                                                 const std::vector<SamplingParams>& sampling_params,
                                                 const std::vector<RequestOptions>& options,
                                                 const TokenCallback& on_token) {
  if (sampling_params.size() != 1 && sampling_params.size() != prompts.size())
    return invalidArgument("generate: " + std::to_string(sampling_params.size()) + " sampling_params for " +
                           std::to_string(prompts.size()) + " prompts; expected 1 or " +
                           std::to_string(prompts.size()));
  if (!options.empty() && options.size() != 1 && options.size() != prompts.size())
    return invalidArgument("generate: " + std::to_string(options.size()) + " request options for " +
                           std::to_string(prompts.size()) + " prompts; expected 0, 1 or " +
                           std::to_string(prompts.size()));
  Executor& ex = *impl_->executor;
  struct Batch {
    std::mutex mu;
    std::condition_variable cv;
    size_t remaining = 0;
    std::vector<RequestOutput> outs;
  };
  auto batch = std::make_shared<Batch>();
  batch->outs.resize(prompts.size());
  std::vector<Request> reqs;
  std::vector<size_t> req_index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestOutput& o = batch->outs[i];
    o.prompt = prompts[i].text.value_or("");
    auto ids = tokenize(ex, prompts[i]);
    if (!ids.isOk()) {
      o.status = ids.status();
      continue;
    }
    o.prompt_token_ids = *ids;
    const SamplingParams& sp = sampling_params.size() == 1 ? sampling_params[0] : sampling_params[i];
    static const RequestOptions kNoOptions;
    const RequestOptions& ro = options.empty() ? kNoOptions : (options.size() == 1 ? options[0] : options[i]);
    Request r = makeRequest(std::move(*ids), sp, ro);
    r.streaming = on_token != nullptr;
    r.callback = [batch, i, on_token](const Response& resp) {
      if (on_token) {
        for (size_t t = 0; t < resp.new_tokens.size(); ++t) {
          const bool last = t + 1 == resp.new_tokens.size();
          on_token(i, resp.sequence_index, resp.new_tokens[t], last ? resp.text : std::string(),
                   last ? resp.finish_reason : FinishReason::kNone);
        }
      }
      std::lock_guard<std::mutex> lock(batch->mu);
      applyResponse(batch->outs[i], resp);
      if (resp.is_final) {
        --batch->remaining;
        batch->cv.notify_all();
      }
    };
    reqs.push_back(std::move(r));
    req_index.push_back(i);
  }
  {
    std::lock_guard<std::mutex> lock(batch->mu);
    batch->remaining = reqs.size();
  }
  if (!reqs.empty()) {
    auto ids = ex.enqueueRequests(std::move(reqs));
    if (!ids.isOk()) return ids.status();
  }
  std::unique_lock<std::mutex> lock(batch->mu);
  batch->cv.wait(lock, [&] { return batch->remaining == 0; });
  for (RequestOutput& o : batch->outs)
    if (o.status.isOk() && o.outputs.empty()) o.status = internalError("generate: the request ended without output");
  return std::move(batch->outs);
}

Result<std::vector<RequestOutput>> LLM::generate(const std::vector<Prompt>& prompts,
                                                 const std::vector<SamplingParams>& sampling_params,
                                                 const std::vector<KvCacheRetentionConfig>& retention) {
  if (retention.size() != 1 && retention.size() != prompts.size())
    return invalidArgument("generate: " + std::to_string(retention.size()) + " kv_cache_retention_config for " +
                           std::to_string(prompts.size()) + " prompts; expected 1 or " +
                           std::to_string(prompts.size()));
  std::vector<RequestOptions> options(retention.size());
  for (size_t i = 0; i < retention.size(); ++i) options[i].kv_cache_retention_config = retention[i];
  return generate(prompts, sampling_params, options);
}

Result<std::unique_ptr<GenerationResult>> LLM::generateAsync(const Prompt& prompt, const SamplingParams& sp,
                                                             const RequestOptions& options) {
  Executor& ex = *impl_->executor;
  LLMRT_ASSIGN_OR_RETURN(std::vector<TokenId> ids, tokenize(ex, prompt));
  auto state = std::make_shared<GenerationResult::State>();
  state->output.prompt = prompt.text.value_or("");
  state->output.prompt_token_ids = ids;
  Request r = makeRequest(std::move(ids), sp, options);
  r.streaming = true;
  r.callback = [state](const Response& resp) {
    std::lock_guard<std::mutex> lock(state->mu);
    applyResponse(state->output, resp);
    if (!resp.new_tokens.empty() || !resp.text.empty() || resp.finish_reason != FinishReason::kNone)
      state->pieces.push_back(StreamDelta{resp.sequence_index, resp.new_tokens, resp.text, resp.finish_reason});
    if (resp.is_final) state->done = true;
    state->cv.notify_all();
  };
  std::unique_ptr<GenerationResult> handle(new GenerationResult());
  handle->state_ = state;
  handle->executor_ = &ex;
  // The callback may run before enqueueRequest returns: the id is set under the lock.
  std::lock_guard<std::mutex> lock(state->mu);
  LLMRT_ASSIGN_OR_RETURN(state->id, ex.enqueueRequest(std::move(r)));
  return handle;
}

Result<std::vector<double>> LLM::promptLogprobs(const std::vector<TokenId>& token_ids) {
  if (token_ids.size() < 2) return invalidArgument("promptLogprobs: need at least 2 tokens");
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 1;
  RequestOptions ro;
  ro.return_context_logits = true;
  // The last token is only scored, never attended to: the prompt stops before it, so a sequence
  // of max_seq_len tokens fits (the one token the request samples is never computed).
  const std::vector<TokenId> prompt(token_ids.begin(), token_ids.end() - 1);
  LLMRT_ASSIGN_OR_RETURN(std::vector<RequestOutput> out, generate({Prompt::fromIds(prompt)}, {p}, {ro}));
  LLMRT_RETURN_IF_ERROR(out[0].status);
  const int64_t vocab = modelConfig().vocab_size;
  const std::vector<float>& logits = out[0].context_logits;
  if (logits.size() != prompt.size() * static_cast<size_t>(vocab))
    return internalError("promptLogprobs: context logits have " + std::to_string(logits.size()) +
                         " values; expected " + std::to_string(prompt.size() * static_cast<size_t>(vocab)));
  std::vector<double> lp(token_ids.size() - 1);
  for (size_t i = 0; i + 1 < token_ids.size(); ++i) {
    const float* row = logits.data() + i * static_cast<size_t>(vocab);
    double mx = row[0];
    for (int64_t v = 1; v < vocab; ++v) mx = std::max<double>(mx, row[v]);
    double sum = 0.0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
    lp[i] = static_cast<double>(row[token_ids[i + 1]]) - mx - std::log(sum);
  }
  return lp;
}

}  // namespace llmrt
