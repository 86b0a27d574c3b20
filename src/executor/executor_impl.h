// Executor internals: the per-request and per-sequence state the loop keeps,
// the queues shared with client threads, and the loop itself. Only
// executor.cpp and executor_loop.cpp include this.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "llmrt/executor.h"
#include "runtime/engine.h"
#include "runtime/output_tracker.h"
#include "sampling/sequence_state.h"
#include "sched/scheduler.h"

namespace llmrt::detail {

using Clock = std::chrono::steady_clock;

struct ExecRequest;

// One generated sequence (a request has sampling_params.n of them).
struct ExecSequence {
  ExecRequest* request = nullptr;
  int index = 0;
  int32_t in_flight = 0;  // launched steps not yet handled that include this sequence
  // The scheduler's view: tokens (prompt + generated, placeholders for launched samples), state.
  SchedRequest sched;
  SequenceSamplingState sampling;
  std::unique_ptr<OutputTracker> tracker;
  // Streaming: what this step produced, not yet responded.
  std::vector<TokenId> new_tokens;
  std::string new_text;
  std::vector<TokenLogprobs> new_logprobs;
  std::vector<float> new_generation_logits;
  // Non-streaming: everything, returned at the end.
  std::vector<TokenLogprobs> all_logprobs;
  std::vector<float> all_generation_logits;
  FinishReason finish = FinishReason::kNone;
  Status error;
};

struct ExecRequest {
  RequestId id = 0;
  Request req;
  std::vector<std::unique_ptr<ExecSequence>> seqs;
  std::vector<float> context_logits;
  Clock::time_point enqueued;
  std::optional<Clock::time_point> first_scheduled, first_token;
  int num_finished = 0;
  bool final_sent = false;
  int32_t cached_tokens = 0;
  int32_t generated = 0;
  int32_t pauses = 0;
};

// A launched step whose results are not handled yet.
struct InFlightStep {
  struct Entry {
    ExecSequence* seq = nullptr;
    bool sample = false;
    bool return_logits = false;  // context logits
    int32_t token_pos = -1;      // sample: where its token goes in seq->sched.tokens
  };
  std::vector<Entry> entries;
};

struct PendingRequest {
  RequestId id;
  Request req;
  Clock::time_point enqueued;
};

}  // namespace llmrt::detail

namespace llmrt {

using detail::Clock;

struct Executor::Impl {
  std::unique_ptr<Engine> engine;  // engine->config(): the resolved configuration
  std::unique_ptr<Scheduler> scheduler;

  // ---- shared with client threads (mutex `mu`) ----
  mutable std::mutex mu;
  std::condition_variable work_cv;           // the loop waits here
  mutable std::condition_variable resp_cv;   // clients wait here
  std::deque<detail::PendingRequest> pending;
  std::vector<RequestId> cancels;
  std::map<RequestId, std::deque<Response>> responses;
  std::set<RequestId> unfinished;  // enqueued, final response not yet delivered
  RequestId next_id = 1;
  bool stopping = false;
  bool stopped = false;
  std::deque<IterationStats> iteration_stats;
  ExecutorStats stats;
  // KV cache events, moved here from the KV cache manager after every step (at most
  // event_buffer_max_size, the oldest dropped); getKvCacheEvents waits on kv_events_cv.
  std::deque<KvCacheEvent> kv_events;
  std::condition_variable kv_events_cv;

  // ---- loop thread only (plus `step_mu` for checkKvInvariants) ----
  std::mutex step_mu;
  std::thread loop;
  std::map<RequestId, std::unique_ptr<detail::ExecRequest>> active;
  std::unordered_map<SequenceId, detail::ExecSequence*> seq_by_id;  // maps the scheduler's plan back
  uint64_t next_arrival = 1;
  uint64_t iteration = 0;
  std::vector<std::pair<std::function<void(const Response&)>, Response>> outbox;  // callbacks to run
  bool overlap = false;                        // ExecutorConfig::overlap resolved
  std::deque<detail::InFlightStep> in_flight;  // launched, results not handled (oldest first, at most two)

  void run();
  // One pass of the loop: intake and cancels, then schedule -> launch -> update. False when idle.
  bool stepOnce(std::vector<detail::PendingRequest>& intake, std::vector<RequestId>& cancel_ids);
  // The sequences the scheduler may run; those whose pending token certainly ends them give
  // their KV back now instead.
  std::vector<SchedRequest*> runnableSequences();
  // The plan's admissions, resumes, pauses and failures into the requests and the iteration stats.
  void notePlan(const SchedulePlan& plan, Clock::time_point t0, IterationStats& it);
  // Launches the plan's step on the runner and tells the scheduler; the step joins in_flight.
  Status launch(SchedulePlan& plan, IterationStats& it);
  // Handles launched steps whose results are due (the older of two, or a step that ran to
  // completion); returns the tokens accepted.
  int32_t update();
  Status validate(const Request& r) const;
  void intakeRequest(detail::PendingRequest p);
  void finishSequence(detail::ExecSequence& s, FinishReason reason, const Status& error = Status::ok());
  void failRequest(detail::ExecRequest& r, const Status& error);
  void emit(detail::ExecRequest& r, Response resp);
  void emitSequence(detail::ExecSequence& s, bool finished);
  void deliver();
  void retireFinished();
  void publishStats(IterationStats* it, int32_t sampled_tokens = 0);
  // Collects the oldest launched step and handles its results (tokens, finishes, responses);
  // returns the tokens accepted. A failed collection fails every request.
  int32_t handleOldestStep();
  // Handles every launched step, oldest first; returns the tokens they sampled.
  int32_t drainInFlight();
  // After a failed step: drops the launched steps and fails every active request.
  void failEverything(const Status& error);
  // Whether a sequence's pending tokens certainly end it (length), so it is not scheduled again.
  bool endsWithPending(const detail::ExecSequence& s) const;
};

}  // namespace llmrt
