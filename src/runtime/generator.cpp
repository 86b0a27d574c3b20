#include "runtime/generator.h"

#include <chrono>
#include <deque>

#include "core/logging.h"
#include "runtime/output_tracker.h"
#include "sampling/stop_criteria.h"

namespace llmrt {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One running sequence (a request has params.n of them).
struct Running {
  size_t request = 0;
  int index = 0;
  SequenceId id = 0;
  std::vector<TokenId> tokens;  // prompt + generated
  size_t prompt_len = 0;
  SequenceSamplingState state;
  std::unique_ptr<OutputTracker> tracker;
  bool done = false;
};

}  // namespace

Status validateRequest(const Engine& engine, const GenerationRequest& r) {
  const int64_t vocab = engine.modelConfig().vocab_size;
  if (r.prompt.empty()) return invalidArgument("request: the prompt is empty");
  for (size_t i = 0; i < r.prompt.size(); ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= vocab)
      return fieldError("request", "prompt[" + std::to_string(i) + "]", std::to_string(r.prompt[i]),
                        "a token id in [0, " + std::to_string(vocab) + ")");
  LLMRT_RETURN_IF_ERROR(r.params.validate(vocab));
  const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.params.max_tokens;
  if (total > engine.maxSeqLen())
    return invalidArgument("request: prompt (" + std::to_string(r.prompt.size()) + " tokens) + max_tokens (" +
                           std::to_string(r.params.max_tokens) + ") = " + std::to_string(total) +
                           " exceeds max_seq_len " + std::to_string(engine.maxSeqLen()));
  if (r.retention) LLMRT_RETURN_IF_ERROR(r.retention->validate());
  return Status::ok();
}

Result<std::vector<GenerationOutput>> generate(Engine& engine, const std::vector<GenerationRequest>& requests,
                                               const GenerationCallback& on_token, GenerationStats* stats) {
  const auto t0 = Clock::now();
  KvCacheManager& kv = engine.kvCache();
  std::vector<GenerationOutput> outputs(requests.size());
  std::deque<size_t> waiting;
  for (size_t i = 0; i < requests.size(); ++i) {
    outputs[i].prompt = requests[i].prompt;
    outputs[i].status = validateRequest(engine, requests[i]);
    if (!outputs[i].status.isOk()) continue;
    outputs[i].sequences.resize(static_cast<size_t>(requests[i].params.n));
    waiting.push_back(i);
  }
  std::vector<std::unique_ptr<Running>> running;
  std::vector<Clock::time_point> started(requests.size());
  int32_t reserved_blocks = 0;  // blocks admitted sequences may still need
  GenerationStats st;

  auto admit = [&]() {
    while (!waiting.empty()) {
      const size_t ri = waiting.front();
      const GenerationRequest& r = requests[ri];
      const int32_t plen = static_cast<int32_t>(r.prompt.size());
      const int32_t need = kv.numBlocksNeeded(plen, r.params.max_tokens) * r.params.n;
      if (running.empty() && need > kv.numAvailableBlocks()) {
        // Even alone it cannot fit: fail it instead of waiting forever.
        outputs[ri].status = resourceExhausted("request needs " + std::to_string(need) +
                                               " KV cache blocks for prompt + max_tokens but the cache has " +
                                               std::to_string(kv.numAvailableBlocks()) + " in all");
        waiting.pop_front();
        continue;
      }
      if (need + reserved_blocks > kv.numAvailableBlocks()) return;  // wait for running ones to finish
      uint64_t seed = requestSeed(r.params);
      for (int s = 0; s < r.params.n; ++s) {
        auto run = std::make_unique<Running>();
        run->request = ri;
        run->index = s;
        run->id = engine.newSequenceId();
        run->tokens = r.prompt;
        run->prompt_len = r.prompt.size();
        run->state = SequenceSamplingState(r.params, r.prompt, seed, static_cast<uint32_t>(s));
        run->tracker = std::make_unique<OutputTracker>(engine.tokenizer(), r.params, r.prompt);
        AddSequenceOptions opts;
        opts.retention = r.retention;
        opts.max_new_tokens = r.params.max_tokens;
        opts.num_tokens_to_allocate = 0;  // chunks are allocated step by step below
        if (r.return_context_logits) {
          // Context logits need every prompt position computed: a salt no other
          // request uses keeps this sequence from matching cached blocks.
          opts.extras.cache_salt = "llmrt:context-logits:" + std::to_string(run->id);
        }
        auto added = kv.addSequence(run->id, r.prompt, opts);
        if (!added.isOk() || added->status != KvAllocStatus::kOk) {
          outputs[ri].status = added.isOk() ? toStatus(added->status) : added.status();
          break;
        }
        if (s == 0) outputs[ri].num_cached_tokens = added->num_reused_tokens;
        reserved_blocks += kv.numBlocksNeededToComplete(run->id);
        running.push_back(std::move(run));
      }
      started[ri] = Clock::now();
      waiting.pop_front();
    }
  };

  admit();
  while (!running.empty()) {
    // Build the step: decode tokens first, then context chunks within max_num_tokens.
    std::vector<StepSequence> step;
    std::vector<Running*> step_runs;
    int64_t budget = engine.maxNumTokens();
    for (auto& run : running) {
      if (static_cast<size_t>(kv.numComputedTokens(run->id)) + 1 == run->tokens.size() &&
          run->tokens.size() > run->prompt_len) {
        StepSequence s;
        s.id = run->id;
        s.num_compute = 1;
        step.push_back(s);
        step_runs.push_back(run.get());
        --budget;
      }
    }
    for (auto& run : running) {
      const int32_t computed = kv.numComputedTokens(run->id);
      if (run->tokens.size() > run->prompt_len || budget <= 0) continue;
      const int32_t remaining = static_cast<int32_t>(run->prompt_len) - computed;
      const int32_t chunk = static_cast<int32_t>(std::min<int64_t>(remaining, budget));
      const int32_t allocated = kv.numAllocatedTokens(run->id);
      if (computed + chunk > allocated) {
        auto st2 = kv.allocatePromptTokens(run->id, computed + chunk - allocated);
        if (!st2.isOk()) return st2.status();
        if (*st2 != KvAllocStatus::kOk) continue;  // cannot happen under the reservation
      }
      StepSequence s;
      s.id = run->id;
      s.num_compute = chunk;
      s.sample = computed + chunk == static_cast<int32_t>(run->prompt_len);
      s.return_logits = requests[run->request].return_context_logits && run->index == 0;
      step.push_back(s);
      step_runs.push_back(run.get());
      budget -= chunk;
    }
    for (size_t i = 0; i < step.size(); ++i) {
      Running* run = step_runs[i];
      const GenerationRequest& r = requests[run->request];
      step[i].tokens = run->tokens;
      if (step[i].num_compute == 1 && run->tokens.size() > run->prompt_len) step[i].sample = true;
      step[i].params = &r.params;
      step[i].state = &run->state;
      step[i].return_last_logits = r.return_generation_logits && step[i].sample;
    }
    LLMRT_ASSIGN_OR_RETURN(std::vector<StepSequenceResult> results, engine.runner().step(step));
    ++st.steps;

    for (size_t i = 0; i < step.size(); ++i) {
      Running* run = step_runs[i];
      const GenerationRequest& r = requests[run->request];
      GenerationOutput& out = outputs[run->request];
      SequenceOutput& so = out.sequences[static_cast<size_t>(run->index)];
      StepSequenceResult& res = results[i];
      if (run->tokens.size() == run->prompt_len) st.context_tokens += static_cast<uint64_t>(step[i].num_compute);
      if (step[i].return_logits) out.context_logits.insert(out.context_logits.end(), res.logits.begin(), res.logits.end());
      if (!step[i].sample) continue;
      if (!res.error.isOk()) {
        out.status = res.error;
        run->tracker->finish(FinishReason::kError);
        so.finish_reason = FinishReason::kError;
        run->done = true;
        continue;
      }
      const TokenId tok = res.sample.token;
      if (run->tokens.size() == run->prompt_len && run->index == 0)
        out.time_to_first_token_s = secondsSince(started[run->request]);
      run->state.accept(tok);
      run->tokens.push_back(tok);
      ++st.generated_tokens;
      if (r.return_generation_logits)
        so.generation_logits.insert(so.generation_logits.end(), res.last_logits.begin(), res.last_logits.end());
      if (r.params.logprobs) {
        TokenLogprobs lp;
        lp.chosen = TokenLogprob{tok, res.sample.logprob};
        auto top = res.sample.topLogprobs();
        lp.top.assign(top.begin(), top.end());
        so.logprobs.push_back(std::move(lp));
      }
      FinishReason fr = checkFinish(tok, run->state, r.params, engine.eosIds());
      if (fr == FinishReason::kNone && static_cast<int64_t>(run->tokens.size()) >= engine.maxSeqLen())
        fr = FinishReason::kLength;
      OutputTracker::Update u = run->tracker->onToken(tok, fr);
      if (on_token) on_token(run->request, run->index, tok, u.text_delta, u.finish);
      if (u.finish != FinishReason::kNone) {
        run->done = true;
        continue;
      }
      auto app = kv.appendToken(run->id, tok);
      if (!app.isOk()) return app.status();
      if (*app != KvAllocStatus::kOk) return internalError("KV cache ran out of blocks despite the admission reservation");
    }

    // Retire finished sequences; admit waiting requests into the freed space.
    for (auto it = running.begin(); it != running.end();) {
      Running* run = it->get();
      if (!run->done) {
        ++it;
        continue;
      }
      GenerationOutput& out = outputs[run->request];
      SequenceOutput& so = out.sequences[static_cast<size_t>(run->index)];
      so.token_ids.assign(run->tokens.begin() + static_cast<std::ptrdiff_t>(run->prompt_len), run->tokens.end());
      so.text = run->tracker->text();
      so.finish_reason = run->tracker->finishReason();
      out.total_time_s = secondsSince(started[run->request]);
      LLMRT_RETURN_IF_ERROR(kv.removeSequence(run->id));
      it = running.erase(it);
    }
    reserved_blocks = 0;
    for (auto& run : running) reserved_blocks += kv.numBlocksNeededToComplete(run->id);
    admit();
  }
  st.seconds = secondsSince(t0);
  if (stats) *stats = st;
  return outputs;
}

}  // namespace llmrt
