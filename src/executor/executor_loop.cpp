// The executor's background loop: intake and validation of new requests,
// cancellation, scheduling, the model step, sampling bookkeeping, responses
// and statistics. Everything here runs on the loop thread; the KV cache
// manager and the scheduler are touched only under `step_mu`.
#include <algorithm>
#include <unordered_map>

#include "core/logging.h"
#include "executor/executor_impl.h"
#include "sampling/stop_criteria.h"

namespace llmrt {

using detail::ExecRequest;
using detail::ExecSequence;

namespace {

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

Status Executor::Impl::validate(const Request& r) const {
  const int64_t vocab = engine->modelConfig().vocab_size;
  const auto& prompt = r.input_token_ids;
  if (prompt.empty()) return invalidArgument("request: the prompt is empty");
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= vocab)
      return fieldError("request", "input_token_ids[" + std::to_string(i) + "]", std::to_string(prompt[i]),
                        "a token id in [0, " + std::to_string(vocab) + ")");
  LLMRT_RETURN_IF_ERROR(r.sampling_params.validate(vocab));
  const int64_t plen = static_cast<int64_t>(prompt.size());
  const int64_t total = plen + r.sampling_params.max_tokens;
  if (total > engine->maxSeqLen())
    return invalidArgument("request: prompt (" + std::to_string(plen) + " tokens) + max_tokens (" +
                           std::to_string(r.sampling_params.max_tokens) + ") = " + std::to_string(total) +
                           " exceeds max_seq_len " + std::to_string(engine->maxSeqLen()));
  const EngineConfig& config = engine->config();
  if (plen > config.max_input_len)
    return invalidArgument("request: prompt (" + std::to_string(plen) + " tokens) exceeds max_input_len " +
                           std::to_string(config.max_input_len));
  if (!config.scheduler_config.enable_chunked_context && plen > config.max_num_tokens)
    return invalidArgument("request: prompt (" + std::to_string(plen) + " tokens) exceeds max_num_tokens " +
                           std::to_string(config.max_num_tokens) +
                           " and enable_chunked_context is off (turn it on or raise max_num_tokens)");
  if (r.kv_cache_retention_config) LLMRT_RETURN_IF_ERROR(r.kv_cache_retention_config->validate());
  return Status::ok();
}

void Executor::Impl::intakeRequest(detail::PendingRequest p) {
  auto er = std::make_unique<ExecRequest>();
  er->id = p.id;
  er->req = std::move(p.req);
  er->enqueued = p.enqueued;
  Status v = validate(er->req);
  if (v.isOk()) {
    // A request that cannot fit the KV cache even alone fails now instead of waiting forever.
    SchedRequest probe;
    probe.tokens = er->req.input_token_ids;
    probe.prompt_len = static_cast<int32_t>(probe.tokens.size());
    probe.max_new_tokens = er->req.sampling_params.max_tokens;
    v = scheduler->checkFitsAlone(probe);
  }
  if (!v.isOk()) {
    Response resp;
    resp.request_id = er->id;
    resp.status = v;
    resp.finish_reason = FinishReason::kError;
    resp.is_final = true;
    RequestStats st;
    st.num_prompt_tokens = static_cast<int32_t>(er->req.input_token_ids.size());
    st.total_time_s = seconds(er->enqueued, Clock::now());
    resp.stats = st;
    er->final_sent = true;
    emit(*er, std::move(resp));
    std::lock_guard<std::mutex> lock(mu);
    ++stats.requests_failed;
    return;
  }
  const SamplingParams& params = er->req.sampling_params;
  const auto& prompt = er->req.input_token_ids;
  const uint64_t seed = requestSeed(params);
  for (int i = 0; i < params.n; ++i) {
    auto s = std::make_unique<ExecSequence>();
    s->request = er.get();
    s->index = i;
    s->sched.id = engine->newSequenceId();
    s->sched.arrival = next_arrival++;
    s->sched.tokens = prompt;
    s->sched.prompt_len = static_cast<int32_t>(prompt.size());
    s->sched.max_new_tokens = params.max_tokens;
    s->sched.add_options.retention = er->req.kv_cache_retention_config;
    if (er->req.return_context_logits && i == 0) {
      // Context logits need every prompt position computed: a salt no other
      // sequence uses keeps this one from matching cached blocks.
      s->sched.add_options.extras.cache_salt = "llmrt:context-logits:" + std::to_string(s->sched.id);
    }
    s->sampling = SequenceSamplingState(params, prompt, seed, static_cast<uint32_t>(i));
    s->tracker = std::make_unique<OutputTracker>(engine->tokenizer(), er->req.sampling_params, prompt);
    seq_by_id[s->sched.id] = s.get();
    er->seqs.push_back(std::move(s));
  }
  active.emplace(er->id, std::move(er));
}

void Executor::Impl::emit(ExecRequest& r, Response resp) {
  outbox.emplace_back(r.req.callback, std::move(resp));
}

void Executor::Impl::emitSequence(ExecSequence& s, bool finished) {
  ExecRequest& r = *s.request;
  Response resp;
  resp.request_id = r.id;
  resp.sequence_index = s.index;
  resp.num_cached_tokens = r.cached_tokens;
  if (r.req.streaming) {
    resp.new_tokens = std::move(s.new_tokens);
    resp.text = std::move(s.new_text);
    resp.logprobs = std::move(s.new_logprobs);
    resp.generation_logits = std::move(s.new_generation_logits);
    s.new_tokens.clear();
    s.new_text.clear();
    s.new_logprobs.clear();
    s.new_generation_logits.clear();
  } else {
    if (!finished) return;
    resp.new_tokens = s.tracker->tokenIds();
    resp.text = s.tracker->text();
    resp.logprobs = std::move(s.all_logprobs);
    resp.generation_logits = std::move(s.all_generation_logits);
  }
  if (!r.req.detokenize) resp.text.clear();
  if (finished) {
    resp.finish_reason = s.finish;
    resp.status = s.error;
    if (s.index == 0 && r.req.return_context_logits) resp.context_logits = std::move(r.context_logits);
    if (r.num_finished == static_cast<int>(r.seqs.size())) {
      resp.is_final = true;
      r.final_sent = true;
      RequestStats st;
      const auto now = Clock::now();
      st.queue_time_s = r.first_scheduled ? seconds(r.enqueued, *r.first_scheduled) : seconds(r.enqueued, now);
      st.time_to_first_token_s = r.first_token ? seconds(r.enqueued, *r.first_token) : 0.0;
      st.total_time_s = seconds(r.enqueued, now);
      st.num_prompt_tokens = static_cast<int32_t>(r.req.input_token_ids.size());
      st.num_cached_tokens = r.cached_tokens;
      st.num_generated_tokens = r.generated;
      st.num_pauses = r.pauses;
      resp.stats = st;
    }
  }
  emit(r, std::move(resp));
}

void Executor::Impl::finishSequence(ExecSequence& s, FinishReason reason, const Status& error) {
  if (s.finish != FinishReason::kNone) return;
  if (s.tracker->finishReason() == FinishReason::kNone) {
    OutputTracker::Update u = s.tracker->finish(reason);
    s.new_text += u.text_delta;
  }
  s.finish = reason;
  s.error = error;
  scheduler->dropPending(s.sched);  // tokens launched steps are still sampling: not part of the output
  Status rel = scheduler->release(s.sched);
  if (!rel.isOk()) LLMRT_LOG_ERROR("executor: releasing sequence %llu: %s", static_cast<unsigned long long>(s.sched.id),
                                   rel.toString().c_str());
  seq_by_id.erase(s.sched.id);
  ++s.request->num_finished;
  emitSequence(s, true);
}

void Executor::Impl::failRequest(ExecRequest& r, const Status& error) {
  for (auto& s : r.seqs) finishSequence(*s, FinishReason::kError, error);
}

void Executor::Impl::retireFinished() {
  for (auto it = active.begin(); it != active.end();) {
    ExecRequest& r = *it->second;
    const bool referenced = std::any_of(r.seqs.begin(), r.seqs.end(), [](const auto& s) { return s->in_flight > 0; });
    if (r.num_finished < static_cast<int>(r.seqs.size()) || referenced) {  // (a launched step still names it)
      ++it;
      continue;
    }
    std::lock_guard<std::mutex> lock(mu);
    bool cancelled = false, failed = false;
    for (auto& s : r.seqs) {
      cancelled |= s->finish == FinishReason::kCancelled;
      failed |= s->finish == FinishReason::kError;
    }
    if (failed) ++stats.requests_failed;
    else if (cancelled) ++stats.requests_cancelled;
    else ++stats.requests_completed;
    it = active.erase(it);
  }
}

void Executor::Impl::deliver() {
  if (outbox.empty()) return;
  std::vector<std::pair<std::function<void(const Response&)>, Response>> out;
  out.swap(outbox);
  for (auto& [cb, resp] : out) {
    if (cb) cb(resp);
    std::lock_guard<std::mutex> lock(mu);
    if (!cb) responses[resp.request_id].push_back(resp);
    if (resp.is_final) unfinished.erase(resp.request_id);
  }
  resp_cv.notify_all();
}

void Executor::Impl::publishStats(IterationStats* it, int32_t sampled_tokens) {
  const KvCacheStats kv = scheduler->kvCache().stats();
  const double device_seconds = engine->backend().deviceStepSeconds();
  // The KV cache manager is touched on this thread only; its events go to the clients' queue.
  std::vector<KvCacheEvent> new_events = scheduler->drainKvEvents();
  // One pass over the requests: the gauges, and the step's queued sequences (waiting or paused).
  int32_t running = 0, waiting = 0, paused = 0, queued_sequences = 0;
  for (auto& [id, r] : active) {
    bool any_live = false, any_running = false, any_paused = false;
    for (auto& s : r->seqs) {
      if (s->finish != FinishReason::kNone) continue;
      any_live = true;
      any_running |= s->sched.state == SchedState::kContext || s->sched.state == SchedState::kGeneration;
      any_paused |= s->sched.state == SchedState::kPaused;
      queued_sequences += s->sched.state == SchedState::kWaiting || s->sched.state == SchedState::kPaused;
    }
    if (!any_live) continue;  // finished, not yet retired
    if (any_running) ++running;
    else if (any_paused) ++paused;
    else ++waiting;
  }
  std::lock_guard<std::mutex> lock(mu);
  stats.num_running_requests = running;
  stats.num_waiting_requests = waiting;
  stats.num_paused_requests = paused;
  if (!new_events.empty()) {
    const size_t max_events = static_cast<size_t>(scheduler->kvCache().config().event_buffer_max_size);
    for (KvCacheEvent& e : new_events) kv_events.push_back(std::move(e));
    while (kv_events.size() > max_events) kv_events.pop_front();
    kv_events_cv.notify_all();
  }
  stats.kv_total_blocks = kv.primary.total;
  stats.kv_free_blocks = kv.primary.free;
  stats.kv_used_blocks = kv.primary.used;
  stats.kv_num_sequences = kv.num_sequences;
  stats.kv_reused_blocks = kv.reused_blocks;
  stats.kv_missed_blocks = kv.missed_blocks;
  stats.kv_reuse_hit_rate = kv.block_hit_rate;
  stats.kv_evicted_blocks = kv.evicted_primary_blocks;
  stats.kv_evicted_secondary_blocks = kv.evicted_secondary_blocks;
  stats.kv_offloaded_blocks = kv.offloaded_blocks;
  stats.kv_onboarded_blocks = kv.onboarded_blocks;
  stats.device_seconds = device_seconds;
  stats.generated_tokens += static_cast<uint64_t>(sampled_tokens);
  if (it == nullptr) return;
  it->num_queued_requests = queued_sequences;
  it->kv_used_blocks = kv.primary.used;
  it->kv_free_blocks = kv.primary.free;
  it->kv_total_blocks = kv.primary.total;
  it->kv_reused_blocks = kv.reused_blocks;
  it->kv_reuse_hit_rate = kv.block_hit_rate;
  ++stats.steps;
  stats.context_tokens += static_cast<uint64_t>(it->num_context_tokens);
  stats.pauses += static_cast<uint64_t>(it->num_paused);
  stats.resumes += static_cast<uint64_t>(it->num_resumed);
  stats.busy_seconds += it->step_time_s;
  const int32_t keep = engine->config().iter_stats_max_iterations;
  if (keep > 0) {
    iteration_stats.push_back(std::move(*it));
    while (iteration_stats.size() > static_cast<size_t>(keep)) iteration_stats.pop_front();
  }
}

bool Executor::Impl::endsWithPending(const ExecSequence& s) const {
  if (s.sched.num_pending == 0) return false;
  const int64_t len = static_cast<int64_t>(s.sched.tokens.size());
  return len - s.sched.prompt_len >= s.request->req.sampling_params.max_tokens || len >= engine->maxSeqLen();
}

void Executor::Impl::failEverything(const Status& error) {
  engine->runner().abandon();
  for (detail::InFlightStep& f : in_flight)
    for (auto& e : f.entries) --e.seq->in_flight;
  in_flight.clear();
  for (auto& [id, r] : active) failRequest(*r, error);
  retireFinished();
}

int32_t Executor::Impl::drainInFlight() {
  int32_t sampled = 0;
  while (!in_flight.empty()) sampled += handleOldestStep();
  return sampled;
}

int32_t Executor::Impl::handleOldestStep() {
  detail::InFlightStep f = std::move(in_flight.front());
  in_flight.pop_front();
  for (auto& e : f.entries) --e.seq->in_flight;
  Result<std::vector<StepSequenceResult>> ran = engine->runner().collect();
  if (!ran.isOk()) {
    // The model or the KV copies failed: nothing in flight can continue.
    LLMRT_LOG_ERROR("executor: step failed: %s", ran.status().toString().c_str());
    failEverything(ran.status());
    return 0;
  }
  std::vector<StepSequenceResult>& results = *ran;
  const auto now = Clock::now();
  int32_t accepted = 0;
  for (size_t i = 0; i < f.entries.size(); ++i) {
    const detail::InFlightStep::Entry& e = f.entries[i];
    ExecSequence& s = *e.seq;
    ExecRequest& r = *s.request;
    StepSequenceResult& res = results[i];
    if (e.return_logits) r.context_logits.insert(r.context_logits.end(), res.logits.begin(), res.logits.end());
    if (!e.sample || s.finish != FinishReason::kNone) continue;  // (finished meanwhile: cancelled, or ended a step earlier)
    if (!res.error.isOk()) {
      finishSequence(s, FinishReason::kError, res.error);
      continue;
    }
    const TokenId tok = res.sample.token;
    if (Status st = scheduler->onTokenKnown(s.sched, e.token_pos, tok); !st.isOk()) {
      finishSequence(s, FinishReason::kError, st);
      continue;
    }
    s.sampling.resolvePending(tok);  // (its step was counted when it was launched)
    ++r.generated;
    ++accepted;
    if (!r.first_token) r.first_token = now;
    const bool streaming = r.req.streaming;
    if (r.req.return_generation_logits) {
      auto& dst = streaming ? s.new_generation_logits : s.all_generation_logits;
      dst.insert(dst.end(), res.last_logits.begin(), res.last_logits.end());
    }
    if (r.req.sampling_params.logprobs) {
      TokenLogprobs lp;
      lp.chosen = TokenLogprob{tok, res.sample.logprob};
      auto top = res.sample.topLogprobs();
      lp.top.assign(top.begin(), top.end());
      (streaming ? s.new_logprobs : s.all_logprobs).push_back(std::move(lp));
    }
    // Generated so far, this token included and the later steps' pending ones not.
    const int64_t generated = s.sampling.numGenerated() - s.sched.num_pending;
    FinishReason fr = checkFinish(tok, generated, r.req.sampling_params, engine->eosIds());
    const int64_t known = static_cast<int64_t>(s.sched.tokens.size()) - s.sched.num_pending;  // (no placeholders)
    if (fr == FinishReason::kNone && known >= engine->maxSeqLen()) fr = FinishReason::kLength;
    OutputTracker::Update u = s.tracker->onToken(tok, fr);
    s.new_tokens.push_back(tok);
    s.new_text += u.text_delta;
    if (u.finish != FinishReason::kNone) {
      finishSequence(s, u.finish);
    } else if (streaming) {
      emitSequence(s, false);
    }
  }
  return accepted;
}

std::vector<SchedRequest*> Executor::Impl::runnableSequences() {
  // Sequences whose pending token ends them for sure (length) are not scheduled again, and their
  // KV goes back now, as it would once that token is handled: what it holds is computed and
  // known, and a device reads it only in steps launched before anything that reuses it.
  std::vector<SchedRequest*> reqs;
  for (auto& [id, r] : active)
    for (auto& s : r->seqs) {
      if (s->finish != FinishReason::kNone) continue;
      if (!endsWithPending(*s)) {
        reqs.push_back(&s->sched);
      } else if (s->sched.holdsKv()) {
        if (Status rel = scheduler->release(s->sched); !rel.isOk())
          LLMRT_LOG_ERROR("executor: releasing sequence %llu: %s", static_cast<unsigned long long>(s->sched.id),
                          rel.toString().c_str());
      }
    }
  return reqs;
}

void Executor::Impl::notePlan(const SchedulePlan& plan, Clock::time_point t0, IterationStats& it) {
  auto seqOf = [this](SchedRequest* r) { return seq_by_id.at(r->id); };
  it.iteration = ++iteration;
  it.num_paused = static_cast<int32_t>(plan.paused.size());
  it.num_resumed = static_cast<int32_t>(plan.resumed.size());
  for (auto& [sr, st] : plan.failed) failRequest(*seqOf(sr)->request, st);
  for (SchedRequest* sr : plan.admitted) {
    ExecSequence* s = seqOf(sr);
    if (!s->request->first_scheduled) s->request->first_scheduled = t0;
    if (s->index == 0) s->request->cached_tokens = std::max(0, sr->num_reused_tokens);
  }
  const int64_t vocab = engine->modelConfig().vocab_size;
  for (SchedRequest* sr : plan.resumed) {
    ExecSequence* s = seqOf(sr);
    it.resumed.push_back(s->request->id);
    // A resumed prompt computes again from its reused prefix: context logits restart there.
    if (s->index == 0 && s->request->req.return_context_logits && sr->tokens.size() == static_cast<size_t>(sr->prompt_len))
      for (const ScheduledSequence& e : plan.sequences)
        if (e.request == sr)
          s->request->context_logits.resize(static_cast<size_t>(e.num_cached) * static_cast<size_t>(vocab));
  }
  for (SchedRequest* sr : plan.paused) {
    ExecSequence* s = seqOf(sr);
    ++s->request->pauses;
    it.paused.push_back(s->request->id);
  }
}

Status Executor::Impl::launch(SchedulePlan& plan, IterationStats& it) {
  std::vector<StepSequence> steps(plan.sequences.size());
  detail::InFlightStep launched;
  launched.entries.resize(plan.sequences.size());
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const ScheduledSequence& e = plan.sequences[i];
    ExecSequence* s = seq_by_id.at(e.request->id);
    const Request& rq = s->request->req;
    StepSequence& st = steps[i];
    st.id = e.request->id;
    st.tokens = e.request->tokens;
    st.num_cached = e.num_cached;
    st.num_compute = e.num_tokens;
    st.block_table = e.block_table;
    st.sample = e.sample;
    st.return_logits = e.is_context && rq.return_context_logits && s->index == 0 &&
                       e.request->tokens.size() == static_cast<size_t>(e.request->prompt_len);
    st.return_last_logits = e.sample && rq.return_generation_logits;
    st.params = &rq.sampling_params;
    st.state = &s->sampling;
    st.fed_last = e.fed_last;
    launched.entries[i] = {s, e.sample, st.return_logits, -1};
    it.scheduled.push_back({s->request->id, s->index, e.num_tokens, e.is_context});
    if (e.is_context) {
      ++it.num_context_requests;
      it.num_context_tokens += e.num_tokens;
    } else {
      ++it.num_generation_requests;
      it.num_generation_tokens += e.num_tokens;
    }
  }
  it.num_scheduled_requests = static_cast<int32_t>(steps.size());
  LLMRT_RETURN_IF_ERROR(engine->runner().launch(steps, plan.copies, overlap));
  if (!in_flight.empty()) {
    std::lock_guard<std::mutex> lock(mu);
    ++stats.overlapped_steps;
  }
  // KV of known tokens computed, a placeholder for each sampled token: the next step can be
  // scheduled before this one's results are back.
  LLMRT_RETURN_IF_ERROR(scheduler->onLaunched(plan));
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    detail::InFlightStep::Entry& e = launched.entries[i];
    ++e.seq->in_flight;
    if (!e.sample) continue;
    e.token_pos = plan.sequences[i].token_pos;
    e.seq->sampling.acceptPending();  // the next step's RNG step and min_tokens count include it
  }
  in_flight.push_back(std::move(launched));
  return Status::ok();
}

int32_t Executor::Impl::update() {
  int32_t sampled = 0;
  // With two steps launched, the older one's tokens are needed to schedule the next.
  if (in_flight.size() == 2) sampled += handleOldestStep();
  if (!in_flight.empty() && !engine->runner().launchedAsync()) sampled += handleOldestStep();  // ran to completion
  return sampled;
}

bool Executor::Impl::stepOnce(std::vector<detail::PendingRequest>& intake, std::vector<RequestId>& cancel_ids) {
  std::lock_guard<std::mutex> step_lock(step_mu);
  const auto t0 = Clock::now();
  for (auto& p : intake) intakeRequest(std::move(p));
  intake.clear();
  for (RequestId id : cancel_ids) {
    auto it = active.find(id);
    if (it == active.end()) continue;
    for (auto& s : it->second->seqs) finishSequence(*s, FinishReason::kCancelled);
  }
  cancel_ids.clear();
  retireFinished();
  const bool any_alive = std::any_of(active.begin(), active.end(), [](const auto& entry) {
    return entry.second->num_finished < static_cast<int>(entry.second->seqs.size());
  });
  if (!any_alive) {
    const bool handled = !in_flight.empty();  // (only finished, e.g. cancelled, sequences are left in them)
    const int32_t sampled = drainInFlight();
    retireFinished();
    publishStats(nullptr, sampled);
    return handled;
  }

  // schedule -> launch -> update
  Result<SchedulePlan> planned = scheduler->schedule(runnableSequences());
  if (!planned.isOk()) {
    LLMRT_LOG_ERROR("executor: scheduling failed: %s", planned.status().toString().c_str());
    failEverything(planned.status());
    publishStats(nullptr);
    return true;
  }
  SchedulePlan& plan = *planned;
  IterationStats it;
  notePlan(plan, t0, it);
  if (plan.empty()) {
    // Nothing to launch: the launched steps' results are what comes next.
    const bool progressed = !plan.failed.empty() || !in_flight.empty();
    const int32_t sampled = drainInFlight();
    retireFinished();
    publishStats(nullptr, sampled);
    return progressed;
  }
  if (Status st = launch(plan, it); !st.isOk()) {
    LLMRT_LOG_ERROR("executor: step failed: %s", st.toString().c_str());
    failEverything(st);
    publishStats(nullptr);
    return true;
  }
  const int32_t sampled = update();

  retireFinished();
  it.step_time_s = seconds(t0, Clock::now());
  publishStats(&it, sampled);
  return true;
}

void Executor::Impl::run() {
  std::vector<detail::PendingRequest> intake;
  std::vector<RequestId> cancel_ids;
  bool progressed = true;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu);
      auto has_work = [&] { return stopping || !pending.empty() || !cancels.empty(); };
      if (active.empty()) {
        work_cv.wait(lock, has_work);
      } else if (!progressed) {
        // Requests wait for something that is not there yet: do not spin.
        work_cv.wait_for(lock, std::chrono::milliseconds(2), has_work);
      }
      if (stopping) break;
      for (auto& p : pending) intake.push_back(std::move(p));
      pending.clear();
      cancel_ids.insert(cancel_ids.end(), cancels.begin(), cancels.end());
      cancels.clear();
    }
    progressed = stepOnce(intake, cancel_ids);
    deliver();
  }
  // Shutdown: launched steps are handled, then everything not finished ends as cancelled.
  {
    std::lock_guard<std::mutex> step_lock(step_mu);
    drainInFlight();
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& p : pending) intake.push_back(std::move(p));
      pending.clear();
      cancels.clear();
    }
    for (auto& p : intake) intakeRequest(std::move(p));
    intake.clear();
    for (auto& [id, r] : active)
      for (auto& s : r->seqs) finishSequence(*s, FinishReason::kCancelled);
    retireFinished();
    publishStats(nullptr);
  }
  deliver();
  {
    std::lock_guard<std::mutex> lock(mu);
    stopped = true;
  }
  resp_cv.notify_all();
  kv_events_cv.notify_all();
}

}  // namespace llmrt
