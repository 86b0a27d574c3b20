#include "runtime/model_runner.h"

#include <algorithm>

namespace llmrt {
// Block tables go from the KV cache manager to the backend as they are: a block the manager
// released (it left every layer's window) reads the same in both.
static_assert(kNoBlock == kNoKvBlock, "the KV manager's and the backend's released-block marks differ");

namespace {

// A sampled token, or the sequence's error (the other sequences of the step go on).
void setSample(StepSequenceResult& out, Result<SampleResult> r) {
  if (!r.isOk()) {
    out.error = r.status();
    return;
  }
  out.sampled = true;
  out.sample = *r;
}

}  // namespace

ModelRunner::StepNeeds ModelRunner::needsOf(std::span<const StepSequence> seqs) {
  StepNeeds n;
  for (const StepSequence& s : seqs) {
    n.logits_wanted = n.logits_wanted || s.return_logits || s.return_last_logits;
    if (!s.sample) continue;
    n.all_greedy = n.all_greedy && plainGreedy(s);
  }
  n.all_greedy = n.all_greedy && !n.logits_wanted;
  return n;
}

bool ModelRunner::plainGreedy(const StepSequence& s) {
  const SamplingParams& p = *s.params;
  return p.isGreedy() && !p.usesRepetitionPenalty() && !p.usesOutputPenalties() && !p.usesLogitBias() && !p.logprobs &&
         (p.min_tokens == 0 || s.state->numGenerated() >= p.min_tokens);
}

ModelRunner::ModelRunner(DecoderModel& model, Backend& backend, std::vector<TokenId> eos_ids, PeerRanks* peers)
    : model_(model), backend_(backend), peers_(peers), eos_ids_(std::move(eos_ids)) {}

Result<std::vector<StepSequenceResult>> ModelRunner::step(std::span<const StepSequence> seqs,
                                                          std::span<const KvBlockCopy> copies) {
  if (!pending_.empty()) return failedPrecondition("step: earlier launches are not collected");
  LLMRT_RETURN_IF_ERROR(launch(seqs, copies, false));
  return collect();
}

Result<std::vector<StepSequenceResult>> ModelRunner::collect() {
  if (pending_.empty()) return failedPrecondition("collect: no launch to collect");
  Launched l = std::move(pending_.front());
  pending_.pop_front();
  if (!l.async) return std::move(l.results);
  std::vector<StepSequenceResult> out(l.sample_row.size());
  if (l.sampled) {
    LLMRT_RETURN_IF_ERROR(l.rows.wait(backend_, l.ticket).withContext("sampling on the backend"));
    for (size_t i = 0; i < out.size(); ++i)
      if (l.sample_row[i] >= 0) setSample(out[i], l.rows.result(static_cast<size_t>(l.sample_row[i]), l.vocab));
    return out;
  }
  LLMRT_RETURN_IF_ERROR(backend_.waitArgmax(l.ticket, collected_ids_.data()).withContext("argmax"));
  for (size_t i = 0; i < out.size(); ++i) {
    if (l.sample_row[i] < 0) continue;
    const int32_t token = collected_ids_[static_cast<size_t>(l.sample_row[i])];
    if (token < 0) {
      out[i].error = internalError("sampling: the logits row holds NaN or +inf, or nothing finite");
      continue;
    }
    out[i].sampled = true;
    out[i].sample.token = token;
  }
  return out;
}

Status ModelRunner::launch(std::span<const StepSequence> seqs, std::span<const KvBlockCopy> copies,
                           bool allow_async) {
  if (pending_.size() >= 2) return failedPrecondition("launch: two launches are not collected yet");
  // 1. The plan's block copies (onboards, offloads, partial reuse).
  if (!copies.empty()) {
    LLMRT_RETURN_IF_ERROR(backend_.copyKvBlocks(copies).withContext("KV block copies"));
    if (peers_) LLMRT_RETURN_IF_ERROR(peers_->copyKvBlocks(copies).withContext("KV block copies"));
  }

  // 2. The packed batch.
  ForwardBatch batch;
  std::vector<int64_t> first_row(seqs.size());
  std::vector<int32_t> pending_src(seqs.size(), -1);
  int64_t rows = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const StepSequence& s = seqs[i];
    if (s.num_compute <= 0 || s.num_cached < 0 || s.num_cached + s.num_compute > static_cast<int64_t>(s.tokens.size()))
      return invalidArgument("step: sequence " + std::to_string(s.id) + " asks for " + std::to_string(s.num_compute) +
                             " tokens after " + std::to_string(s.num_cached) + " of its " +
                             std::to_string(s.tokens.size()));
    if (s.fed_last) {
      const auto it = std::ranges::lower_bound(fed_rows_, s.id, {}, &std::pair<SequenceId, int32_t>::first);
      if (it == fed_rows_.end() || it->first != s.id || s.num_compute != 1 ||
          s.num_cached + 1 != static_cast<int64_t>(s.tokens.size()))
        return internalError("launch: sequence " + std::to_string(s.id) +
                             " waits for a token the previous launch does not sample on the backend");
      batch.fed.push_back(FedToken{static_cast<int32_t>(batch.numTokens()), it->second});
      pending_src[i] = it->second;
    }
    LogitsMode mode = s.return_logits ? LogitsMode::kAll : (s.sample || s.return_last_logits ? LogitsMode::kLast
                                                                                              : LogitsMode::kNone);
    batch.add(s.tokens.data() + s.num_cached, s.num_compute, s.num_cached,
              std::vector<int32_t>(s.block_table.begin(), s.block_table.end()), mode);
    first_row[i] = rows;
    rows += mode == LogitsMode::kAll ? s.num_compute : (mode == LogitsMode::kLast ? 1 : 0);
  }

  // 3. Forward (the scheduler marks the KV computed once the launch is done).
  StepLayout layout;
  LLMRT_ASSIGN_OR_RETURN(const StepInputs inputs, step_builder_.build(batch, model_, backend_, &layout));
  if (peers_) peers_->start(inputs, layout);  // (the other ranks run the same step alongside)
  Result<TensorView> forward = model_.forward(inputs, layout);
  if (peers_) {
    if (!forward.isOk()) peers_->abort(forward.status());
    const Status peer = peers_->wait();
    if (forward.isOk() && !peer.isOk()) return peer;
  }
  LLMRT_ASSIGN_OR_RETURN(TensorView logits, std::move(forward));
  fed_rows_.clear();

  // 4. An async launch: the tokens stay on the backend for the next step and come back later.
  Launched l;
  if (allow_async && logits.shape[0] > 0) {
    const StepNeeds needs = needsOf(seqs);
    if (!needs.all_greedy && !needs.logits_wanted) {
      for (size_t i = 0; i < seqs.size(); ++i)
        if (seqs[i].sample) l.rows.add(*seqs[i].params, *seqs[i].state, eos_ids_, pending_src[i]);
      if (static_cast<int64_t>(l.rows.rows().size()) != logits.shape[0])
        return internalError("launch: sampled sequences and logits rows disagree");
    }
    if (!l.rows.rows().empty() && backend_.samplesRows(l.rows.rows(), logits.shape[1])) {
      LLMRT_ASSIGN_OR_RETURN(l.ticket, l.rows.start(backend_, logits));
      l.async = true;
      l.sampled = true;
      l.vocab = logits.shape[1];
      l.sample_row.assign(seqs.size(), -1);
      int32_t row = 0;
      for (size_t i = 0; i < seqs.size(); ++i) {
        if (!seqs[i].sample) continue;
        l.sample_row[i] = row;
        fed_rows_.emplace_back(seqs[i].id, row++);
      }
      std::sort(fed_rows_.begin(), fed_rows_.end());
      pending_.push_back(std::move(l));
      return Status::ok();
    }
    if (needs.all_greedy) {
      LLMRT_ASSIGN_OR_RETURN(l.ticket, backend_.argmaxRowsAsync(logits));
      l.async = true;
      l.sample_row.assign(seqs.size(), -1);
      for (size_t i = 0; i < seqs.size(); ++i) {
        if (!seqs[i].sample) continue;
        l.sample_row[i] = first_row[i];
        fed_rows_.emplace_back(seqs[i].id, static_cast<int32_t>(first_row[i]));
      }
      std::sort(fed_rows_.begin(), fed_rows_.end());
      collected_ids_.resize(std::max(collected_ids_.size(), static_cast<size_t>(logits.shape[0])));
      pending_.push_back(std::move(l));
      return Status::ok();
    }
  }
  LLMRT_ASSIGN_OR_RETURN(l.results, finishSync(seqs, batch, logits, first_row, pending_src));
  pending_.push_back(std::move(l));
  return Status::ok();
}

Result<std::vector<StepSequenceResult>> ModelRunner::finishSync(std::span<const StepSequence> seqs,
                                                                const ForwardBatch& batch, const TensorView& logits,
                                                                std::span<const int64_t> first_row,
                                                                std::span<const int32_t> pending_src) {
  // Sampling and requested logits. When every sampled sequence decodes greedily
  // with nothing that changes its logits and no logits go back to the caller, the
  // backend's argmax runs where the logits are and only token ids cross to the host.
  const int64_t vocab = logits.shape[1];
  std::vector<StepSequenceResult> out(seqs.size());
  const StepNeeds needs = needsOf(seqs);
  if (logits.shape[0] > 0 && backend_.hasArgmax()) {
    if (needs.all_greedy) {
      argmax_.resize(static_cast<size_t>(logits.shape[0]));
      LLMRT_RETURN_IF_ERROR(backend_.argmaxRows(logits, argmax_.data()).withContext("argmax"));
      bool fallback = false;  // a row with NaN / +inf: the host sampler reports it
      for (size_t i = 0; i < seqs.size(); ++i) {
        if (!seqs[i].sample) continue;
        const int32_t token = argmax_[static_cast<size_t>(first_row[i])];
        if (token < 0) {
          fallback = true;
          break;
        }
        out[i].sampled = true;
        out[i].sample = SampleResult{};
        out[i].sample.token = token;
      }
      if (!fallback) return out;
      out.assign(seqs.size(), StepSequenceResult{});
    }
  }
  // Otherwise, when no logits go back to the caller and the backend samples, every
  // row is sampled where the logits are: only tokens (and requested logprobs) come back.
  if (logits.shape[0] > 0 && !needs.logits_wanted) {
    device_sampling_.clear();
    for (size_t i = 0; i < seqs.size(); ++i)
      if (seqs[i].sample) device_sampling_.add(*seqs[i].params, *seqs[i].state, eos_ids_, pending_src[i]);
    if (static_cast<int64_t>(device_sampling_.rows().size()) != logits.shape[0])
      return internalError("step: sampled sequences and logits rows disagree");
    if (backend_.samplesRows(device_sampling_.rows(), vocab)) {
      LLMRT_RETURN_IF_ERROR(device_sampling_.run(backend_, logits).withContext("sampling on the backend"));
      size_t row = 0;
      for (size_t i = 0; i < seqs.size(); ++i) {
        if (!seqs[i].sample) continue;
        setSample(out[i], device_sampling_.result(row++, vocab));
      }
      return out;
    }
  }
  if (logits.shape[0] > 0) {
    host_logits_.resize(static_cast<size_t>(logits.shape[0] * vocab));
    LLMRT_RETURN_IF_ERROR(backend_.copyToHost(logits, host_logits_.data()).withContext("logits to host"));
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    const StepSequence& s = seqs[i];
    const ForwardSeq& fs = batch.seqs[i];
    if (fs.logits == LogitsMode::kNone) continue;
    const int64_t n_rows = fs.logits == LogitsMode::kAll ? s.num_compute : 1;
    const float* last = host_logits_.data() + (first_row[i] + n_rows - 1) * vocab;
    if (s.return_logits) {
      const float* first = host_logits_.data() + first_row[i] * vocab;
      out[i].logits.assign(first, first + n_rows * vocab);
    }
    if (s.return_last_logits) out[i].last_logits.assign(last, last + vocab);
    if (!s.sample) continue;
    if (pending_src[i] >= 0 && s.params->usesPenalties()) {
      // The penalties need the previous launch's token, still pending in the state.
      Result<int32_t> token = previousToken(pending_src[i]);
      if (!token.isOk()) {
        out[i].error = token.status();
        continue;
      }
      SequenceSamplingState state = *s.state;
      state.resolvePending(*token);
      setSample(out[i], sampler_.sample(last, vocab, *s.params, state, eos_ids_));
      continue;
    }
    setSample(out[i], sampler_.sample(last, vocab, *s.params, *s.state, eos_ids_));
  }
  return out;
}

Result<int32_t> ModelRunner::previousToken(int32_t src) {
  // launch() has not queued this step yet: the previous launch is the newest one queued. A
  // sequence with penalties is never plain greedy, so that launch sampled it (not an argmax).
  if (pending_.empty() || !pending_.back().async || !pending_.back().sampled)
    return internalError("sampling: a pending token without an uncollected sampled launch");
  Launched& prev = pending_.back();
  LLMRT_RETURN_IF_ERROR(prev.rows.wait(backend_, prev.ticket).withContext("the previous step's tokens"));
  LLMRT_ASSIGN_OR_RETURN(SampleResult r, prev.rows.result(static_cast<size_t>(src), prev.vocab));
  return r.token;
}

}  // namespace llmrt
