// Executor: public methods, queues shared with client threads, lifecycle.
// The step loop is in executor_loop.cpp.
#include "llmrt/executor.h"

#include "core/logging.h"
#include "executor/executor_impl.h"

namespace llmrt {

Executor::Executor() : impl_(std::make_unique<Impl>()) {}

Executor::~Executor() { shutdown(); }

Result<std::unique_ptr<Executor>> Executor::create(const EngineConfig& config) {
  LLMRT_RETURN_IF_ERROR(config.validate());
  std::unique_ptr<Executor> ex(new Executor());
  Impl& im = *ex->impl_;
  LLMRT_ASSIGN_OR_RETURN(im.engine, Engine::create(config));
  const EngineConfig& rc = im.engine->config();
  SchedulerOptions so;
  so.config = rc.scheduler_config;
  so.max_batch_size = rc.max_batch_size;
  so.max_num_tokens = static_cast<int32_t>(rc.max_num_tokens);
  im.scheduler = std::make_unique<Scheduler>(so, im.engine->kvCache());
  im.overlap = rc.overlap == OverlapMode::kOn;
  im.publishStats(nullptr);
  im.loop = std::thread([&im] { im.run(); });
  return ex;
}

Result<RequestId> Executor::enqueueRequest(Request request) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->stopping) return failedPrecondition("enqueueRequest: the executor has been shut down");
  const RequestId id = impl_->next_id++;
  impl_->pending.push_back({id, std::move(request), detail::Clock::now()});
  impl_->unfinished.insert(id);
  impl_->work_cv.notify_one();
  return id;
}

Result<std::vector<RequestId>> Executor::enqueueRequests(std::vector<Request> requests) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->stopping) return failedPrecondition("enqueueRequests: the executor has been shut down");
  std::vector<RequestId> ids;
  ids.reserve(requests.size());
  const auto now = detail::Clock::now();
  for (Request& r : requests) {
    const RequestId id = impl_->next_id++;
    impl_->pending.push_back({id, std::move(r), now});
    impl_->unfinished.insert(id);
    ids.push_back(id);
  }
  impl_->work_cv.notify_one();
  return ids;
}

namespace {

template <typename Pred>
bool waitFor(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
             std::optional<std::chrono::milliseconds> timeout, Pred pred) {
  if (!timeout) {
    cv.wait(lock, pred);
    return true;
  }
  return cv.wait_for(lock, *timeout, pred);
}

}  // namespace

std::vector<Response> Executor::awaitResponses(RequestId id, std::optional<std::chrono::milliseconds> timeout) {
  Impl& im = *impl_;
  std::unique_lock<std::mutex> lock(im.mu);
  auto ready = [&] {
    auto it = im.responses.find(id);
    return (it != im.responses.end() && !it->second.empty()) || !im.unfinished.count(id);
  };
  waitFor(im.resp_cv, lock, timeout, ready);
  std::vector<Response> out;
  auto it = im.responses.find(id);
  if (it != im.responses.end()) {
    out.assign(std::make_move_iterator(it->second.begin()), std::make_move_iterator(it->second.end()));
    im.responses.erase(it);
  }
  return out;
}

std::vector<Response> Executor::awaitResponses(std::optional<std::chrono::milliseconds> timeout) {
  Impl& im = *impl_;
  std::unique_lock<std::mutex> lock(im.mu);
  waitFor(im.resp_cv, lock, timeout, [&] { return !im.responses.empty() || im.unfinished.empty(); });
  std::vector<Response> out;
  for (auto& [id, q] : im.responses)
    for (Response& r : q) out.push_back(std::move(r));
  im.responses.clear();
  return out;
}

size_t Executor::getNumResponsesReady(std::optional<RequestId> id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (id) {
    auto it = impl_->responses.find(*id);
    return it == impl_->responses.end() ? 0 : it->second.size();
  }
  size_t n = 0;
  for (const auto& [rid, q] : impl_->responses) n += q.size();
  return n;
}

void Executor::cancelRequest(RequestId id) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->unfinished.count(id)) return;
  impl_->cancels.push_back(id);
  impl_->work_cv.notify_one();
}

void Executor::shutdown() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping && !impl_->loop.joinable()) return;
    impl_->stopping = true;
    impl_->work_cv.notify_all();
  }
  if (impl_->loop.joinable()) impl_->loop.join();
}

std::vector<IterationStats> Executor::getLatestIterationStats() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<IterationStats> out(std::make_move_iterator(impl_->iteration_stats.begin()),
                                  std::make_move_iterator(impl_->iteration_stats.end()));
  impl_->iteration_stats.clear();
  return out;
}

std::vector<KvCacheEvent> Executor::getKvCacheEvents(std::optional<std::chrono::milliseconds> timeout) {
  Impl& im = *impl_;
  // (The KV cache manager's config never changes after it is built: safe to read here.)
  if (im.scheduler->kvCache().config().event_buffer_max_size == 0) return {};
  std::unique_lock<std::mutex> lock(im.mu);
  waitFor(im.kv_events_cv, lock, timeout, [&] { return !im.kv_events.empty() || im.stopped; });
  std::vector<KvCacheEvent> out(std::make_move_iterator(im.kv_events.begin()),
                                std::make_move_iterator(im.kv_events.end()));
  im.kv_events.clear();
  return out;
}

ExecutorStats Executor::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  ExecutorStats s = impl_->stats;
  s.num_waiting_requests += static_cast<int32_t>(impl_->pending.size());  // not taken by the loop yet
  return s;
}

size_t Executor::numActiveRequests() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->unfinished.size();
}

bool Executor::waitIdle(std::optional<std::chrono::milliseconds> timeout) const {
  std::unique_lock<std::mutex> lock(impl_->mu);
  return waitFor(impl_->resp_cv, lock, timeout, [&] { return impl_->unfinished.empty(); });
}

const EngineConfig& Executor::config() const { return impl_->engine->config(); }
const ModelConfig& Executor::modelConfig() const { return impl_->engine->modelConfig(); }
const Tokenizer* Executor::tokenizer() const { return impl_->engine->tokenizer(); }
int64_t Executor::maxSeqLen() const { return impl_->engine->maxSeqLen(); }

SamplingParams Executor::defaultSamplingParams(SamplingParams base) const {
  SamplingParams& p = base;
  const auto& gen = impl_->engine->modelDirectory().generation;
  if (!gen) return p;
  // As vLLM: only what the file says (HF's own GenerationConfig defaults, e.g. top_k 50, do not apply).
  if (gen->do_sample) p.temperature = *gen->do_sample ? 1.0f : 0.0f;
  if (gen->temperature && (!gen->do_sample || *gen->do_sample)) p.temperature = static_cast<float>(*gen->temperature);
  if (gen->top_k) p.top_k = static_cast<int>(*gen->top_k);
  if (gen->top_p) p.top_p = static_cast<float>(*gen->top_p);
  if (gen->min_p) p.min_p = static_cast<float>(*gen->min_p);
  if (gen->repetition_penalty) p.repetition_penalty = static_cast<float>(*gen->repetition_penalty);
  if (gen->max_new_tokens && *gen->max_new_tokens >= 1)
    p.max_tokens = static_cast<int>(std::min<int64_t>(*gen->max_new_tokens, 1 << 30));
  return p;
}

Status Executor::checkKvInvariants() {
  std::lock_guard<std::mutex> lock(impl_->step_mu);
  return impl_->scheduler->kvCache().checkInvariants();
}

}  // namespace llmrt
