#include "sched/scheduler.h"

#include <algorithm>
#include <cassert>

#include "core/logging.h"
#include "sched/capacity_policy.h"
#include "sched/chunking_policy.h"

namespace llmrt {

std::string_view toString(SchedState state) {
  switch (state) {
    case SchedState::kWaiting:
      return "waiting";
    case SchedState::kContext:
      return "context";
    case SchedState::kGeneration:
      return "generation";
    case SchedState::kPaused:
      return "paused";
    case SchedState::kDone:
      return "done";
  }
  return "?";
}

struct Scheduler::Context {
  std::vector<SchedRequest*> in_flight;  // holding KV, by start order
  std::vector<SchedRequest*> candidates;  // paused (by start order) then waiting (by arrival)
  std::vector<SchedRequest*> planned;     // already given work (or allocations) this step
  SchedulePlan plan;
  int32_t budget = 0;
  bool nothing_in_flight_at_start = false;
  std::unique_ptr<CapacityPolicy> policy;

  bool isPlanned(const SchedRequest* r) const { return std::find(planned.begin(), planned.end(), r) != planned.end(); }
  int32_t numInFlight() const {
    return static_cast<int32_t>(std::count_if(in_flight.begin(), in_flight.end(),
                                              [](const SchedRequest* r) { return r->holdsKv(); }));
  }
};

Scheduler::Scheduler(const SchedulerOptions& options, KvCacheManager& kv) : options_(options), kv_(kv) {
  total_blocks_ = kv_.stats().primary.total;
}

Status Scheduler::checkFitsAlone(const SchedRequest& r) const {
  const int32_t len = static_cast<int32_t>(r.tokens.size());
  const int32_t need = kv_.numBlocksNeeded(len, std::max(0, r.remainingNewTokens()));
  if (need <= total_blocks_) return Status::ok();
  return resourceExhausted("request needs " + std::to_string(need) + " KV cache blocks (" + std::to_string(len) +
                           " prompt tokens + max_tokens " + std::to_string(std::max(0, r.remainingNewTokens())) +
                           " at " + std::to_string(kv_.tokensPerBlock()) +
                           " tokens per block) but the KV cache has only " + std::to_string(total_blocks_) +
                           " blocks in all: it can never fit, even alone");
}

Status Scheduler::release(SchedRequest& r) {
  if (r.holdsKv() && kv_.hasSequence(r.id)) LLMRT_RETURN_IF_ERROR(kv_.removeSequence(r.id));
  r.state = SchedState::kDone;
  r.fed_uncomputed = false;
  return Status::ok();
}

int32_t Scheduler::reservedBlocks(const Context& ctx) const {
  int32_t sum = 0;
  for (const SchedRequest* r : ctx.in_flight)
    if (r->holdsKv()) sum += kv_.numBlocksNeededToComplete(r->id);
  return sum;
}

Status Scheduler::pause(Context& ctx, SchedRequest& victim) {
  LLMRT_RETURN_IF_ERROR(kv_.removeSequence(victim.id));
  victim.fed_uncomputed = false;  // (its KV is gone; a resume recomputes it)
  auto drop = [&](std::vector<SchedRequest*>& v) {
    auto it = std::find(v.begin(), v.end(), &victim);
    if (it == v.end()) return false;
    v.erase(it);
    return true;
  };
  if (drop(ctx.plan.admitted)) {
    // Admitted and pushed out within one step: as if it had never started.
    victim.state = SchedState::kWaiting;
    victim.start_order = 0;
    victim.num_reused_tokens = -1;
    return Status::ok();
  }
  victim.state = SchedState::kPaused;
  if (drop(ctx.plan.resumed)) return Status::ok();  // resumed and paused again within one step
  ++victim.num_pauses;
  ctx.plan.paused.push_back(&victim);
  return Status::ok();
}

Result<bool> Scheduler::pauseLatest(Context& ctx, const SchedRequest* keep) {
  SchedRequest* victim = nullptr;
  for (SchedRequest* r : ctx.in_flight) {
    if (!r->holdsKv() || ctx.isPlanned(r)) continue;
    if (victim == nullptr || r->start_order > victim->start_order) victim = r;
  }
  if (victim == nullptr) return false;  // `keep` itself is a candidate: it is in flight and not planned
  LLMRT_RETURN_IF_ERROR(pause(ctx, *victim));
  return true;
}

void Scheduler::noteBrokenGuarantee() {
  ++num_broken_guarantees_;
  if (num_broken_guarantees_ > 1) return;
  LLMRT_LOG_WARNING(
      "scheduler: a %s reservation fell short (cached blocks became locked under a running sequence's shared "
      "prefix); pausing the most recently started request instead of failing it",
      std::string(toString(options_.config.capacity_scheduler_policy)).c_str());
}

Status Scheduler::scheduleGeneration(Context& ctx) {
  for (SchedRequest* r : ctx.in_flight) {
    if (r->state != SchedState::kGeneration) continue;
    if (ctx.budget <= 0) break;  // the rest wait a step (they keep their blocks)
    while (r->state == SchedState::kGeneration) {
      LLMRT_ASSIGN_OR_RETURN(KvAllocStatus st, kv_.appendToken(r->id, r->tokens.back()));
      if (st == KvAllocStatus::kOk) {
        ctx.plan.sequences.emplace_back(r, 1, false, true);
        ctx.planned.push_back(r);
        ctx.budget -= 1;
        ctx.plan.num_generation_tokens += 1;
        break;
      }
      if (!ctx.policy->pausesOnShortage()) noteBrokenGuarantee();
      LLMRT_ASSIGN_OR_RETURN(bool paused, pauseLatest(ctx, r));
      if (!paused) return internalError("scheduler: no sequence left to pause");
    }
  }
  return Status::ok();
}

Status Scheduler::admit(Context& ctx) {
  int32_t in_flight = ctx.numInFlight();
  int32_t reserved = ctx.policy->needsReservation() ? reservedBlocks(ctx) : 0;
  int32_t projected_budget = ctx.budget;
  const int32_t tpb = kv_.tokensPerBlock();
  for (SchedRequest* r : ctx.candidates) {
    if (in_flight >= options_.max_batch_size) break;
    if (Status fits = checkFitsAlone(*r); !fits.isOk()) {
      r->state = SchedState::kDone;
      ctx.plan.failed.emplace_back(r, fits);
      continue;
    }
    const int32_t len = static_cast<int32_t>(r->tokens.size());
    const int32_t remaining_new = std::max(0, r->remainingNewTokens());
    // The smallest first chunk it could get: one aligned piece (a block, or one token when this
    // step's context budget is smaller than a block), or the whole context without chunking.
    const bool whole = !options_.config.enable_chunked_context && len <= options_.max_num_tokens;
    const int32_t min_chunk = whole ? len : std::min(len, chunkAlignment(tpb, ctx.budget));
    AdmissionQuery q;
    q.nothing_in_flight_at_start = ctx.nothing_in_flight_at_start;
    q.reserved_blocks = reserved;
    q.needed_blocks = kv_.numBlocksNeeded(len, remaining_new);
    q.available_blocks = kv_.numAvailableBlocks();
    q.min_chunk_blocks = (min_chunk + tpb - 1) / tpb;
    q.budget_left = projected_budget;
    q.min_chunk_tokens = min_chunk;
    if (!ctx.policy->mayAdmit(q)) break;  // first come, first served: no overtaking

    AddSequenceOptions opts = r->add_options;
    opts.max_new_tokens = remaining_new;
    opts.num_tokens_to_allocate = 0;  // chunks are allocated by scheduleContextChunks
    // A resumed sequence re-enters with its generated tokens: the KV cache manager must still
    // know where its prompt ends, so their blocks keep the decode retention priority / duration.
    if (r->prompt_len >= 1 && r->prompt_len <= len) opts.num_prompt_tokens = r->prompt_len;
    LLMRT_ASSIGN_OR_RETURN(AddSequenceResult added, kv_.addSequence(r->id, r->tokens, opts));
    if (added.status != KvAllocStatus::kOk) break;  // the reused blocks are not there: wait
    const bool resumed = r->state == SchedState::kPaused;
    r->state = SchedState::kContext;
    if (resumed) {
      ctx.plan.resumed.push_back(r);
    } else {
      r->start_order = next_start_order_++;
      r->num_reused_tokens = added.num_reused_tokens;
      ctx.plan.admitted.push_back(r);
    }
    ctx.in_flight.push_back(r);
    ++in_flight;
    if (ctx.policy->needsReservation()) reserved += kv_.numBlocksNeededToComplete(r->id);
    projected_budget -= std::min(min_chunk, len - added.num_reused_tokens);
  }
  return Status::ok();
}

Status Scheduler::scheduleContextChunks(Context& ctx) {
  std::vector<SchedRequest*> seqs;
  for (SchedRequest* r : ctx.in_flight)
    if (r->state == SchedState::kContext) seqs.push_back(r);
  std::stable_sort(seqs.begin(), seqs.end(),
                   [](const SchedRequest* a, const SchedRequest* b) { return a->arrival < b->arrival; });
  std::vector<ChunkCandidate> cands(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    cands[i].computed = kv_.numComputedTokens(seqs[i]->id);
    cands[i].target = static_cast<int32_t>(seqs[i]->tokens.size());
  }
  ChunkingOptions co;
  co.policy = options_.config.context_chunking_policy;
  co.enable_chunking = options_.config.enable_chunked_context;
  co.tokens_per_block = kv_.tokensPerBlock();
  co.max_num_tokens = options_.max_num_tokens;
  assignChunks(co, cands, ctx.budget);

  for (size_t i = 0; i < seqs.size(); ++i) {
    SchedRequest* r = seqs[i];
    const int32_t chunk = cands[i].chunk;
    if (chunk <= 0 || r->state != SchedState::kContext) continue;
    while (r->state == SchedState::kContext) {
      const int32_t computed = kv_.numComputedTokens(r->id);
      const int32_t to_alloc = computed + chunk - kv_.numAllocatedTokens(r->id);
      KvAllocStatus st = KvAllocStatus::kOk;
      if (to_alloc > 0) {
        LLMRT_ASSIGN_OR_RETURN(st, kv_.allocatePromptTokens(r->id, to_alloc));
      }
      if (st == KvAllocStatus::kOk) {
        const bool last = computed + chunk == static_cast<int32_t>(r->tokens.size());
        ctx.plan.sequences.emplace_back(r, chunk, true, last);
        ctx.planned.push_back(r);
        ctx.budget -= chunk;
        ctx.plan.num_context_tokens += chunk;
        break;
      }
      if (!ctx.policy->pausesOnShortage()) noteBrokenGuarantee();
      LLMRT_ASSIGN_OR_RETURN(bool paused, pauseLatest(ctx, r));
      if (!paused) break;
    }
  }
  return Status::ok();
}

Result<SchedulePlan> Scheduler::schedule(std::span<SchedRequest* const> requests) {
  Context ctx;
  ctx.policy = makeCapacityPolicy(options_.config.capacity_scheduler_policy);
  ctx.budget = options_.max_num_tokens;
  std::vector<SchedRequest*> paused, waiting;
  for (SchedRequest* r : requests) {
    if (r->holdsKv()) ctx.in_flight.push_back(r);
    else if (r->state == SchedState::kPaused) paused.push_back(r);
    else if (r->state == SchedState::kWaiting) waiting.push_back(r);
  }
  auto by_start = [](const SchedRequest* a, const SchedRequest* b) { return a->start_order < b->start_order; };
  auto by_arrival = [](const SchedRequest* a, const SchedRequest* b) { return a->arrival < b->arrival; };
  std::sort(ctx.in_flight.begin(), ctx.in_flight.end(), by_start);
  std::sort(paused.begin(), paused.end(), by_start);
  std::sort(waiting.begin(), waiting.end(), by_arrival);
  ctx.candidates = std::move(paused);
  ctx.candidates.insert(ctx.candidates.end(), waiting.begin(), waiting.end());
  ctx.nothing_in_flight_at_start = ctx.in_flight.empty();

  LLMRT_RETURN_IF_ERROR(scheduleGeneration(ctx));
  LLMRT_RETURN_IF_ERROR(admit(ctx));
  LLMRT_RETURN_IF_ERROR(scheduleContextChunks(ctx));
  completePlan(ctx.plan);
  return std::move(ctx.plan);
}

void Scheduler::completePlan(SchedulePlan& plan) {
  for (ScheduledSequence& e : plan.sequences) {
    const SchedRequest& r = *e.request;
    e.num_cached = kv_.numComputedTokens(r.id);
    const std::span<const BlockId> table = kv_.blockTable(r.id);
    e.block_table.assign(table.begin(), table.end());
    // A generation step computes the newest token; while it is a placeholder the device holds it.
    e.fed_last = !e.is_context && r.num_pending > 0;
  }
  if (kv_.hasPendingCopies()) plan.copies = kv_.takePendingCopies();
}

Status Scheduler::onLaunched(SchedulePlan& plan) {
  for (ScheduledSequence& e : plan.sequences) {
    SchedRequest& r = *e.request;
    if (e.fed_last) {
      r.fed_uncomputed = true;  // marked computed once its token is known (onTokenKnown)
    } else {
      LLMRT_RETURN_IF_ERROR(kv_.markComputed(r.id, e.num_tokens));
    }
    if (e.is_context && e.sample && r.state == SchedState::kContext) r.state = SchedState::kGeneration;
    if (!e.sample) continue;
    e.token_pos = static_cast<int32_t>(r.tokens.size());
    r.tokens.push_back(kPendingToken);
    ++r.num_pending;
  }
  return Status::ok();
}

Status Scheduler::onTokenKnown(SchedRequest& r, int32_t pos, TokenId token) {
  if (pos < 0 || pos >= static_cast<int32_t>(r.tokens.size()) || r.tokens[static_cast<size_t>(pos)] != kPendingToken)
    return internalError("scheduler: sequence " + std::to_string(r.id) + " has no pending token at " +
                         std::to_string(pos));
  r.tokens[static_cast<size_t>(pos)] = token;
  --r.num_pending;
  if (!r.holdsKv() || !kv_.hasSequence(r.id) || kv_.numTokens(r.id) <= pos) return Status::ok();
  // The KV cache manager holds the placeholder too: a later step already computes (or computed) it.
  LLMRT_RETURN_IF_ERROR(kv_.resolveToken(r.id, pos, token));
  if (r.fed_uncomputed && kv_.numComputedTokens(r.id) == pos) {
    // The launched step that fed this token from the device's copy wrote its KV: now that the
    // token is known its block may be keyed (full blocks enter the reuse tree).
    r.fed_uncomputed = false;
    LLMRT_RETURN_IF_ERROR(kv_.markComputed(r.id, 1));
  }
  return Status::ok();
}

void Scheduler::dropPending(SchedRequest& r) {
  r.tokens.resize(r.tokens.size() - static_cast<size_t>(r.num_pending));
  r.num_pending = 0;
  r.fed_uncomputed = false;
}

}  // namespace llmrt
