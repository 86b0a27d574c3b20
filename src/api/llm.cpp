#include "llmrt/llm.h"

#include <cmath>

#include "runtime/engine.h"
#include "runtime/generator.h"

namespace llmrt {

struct LLM::Impl {
  std::unique_ptr<Engine> engine;
  GenerationStats totals;
};

LLM::LLM() : impl_(std::make_unique<Impl>()) {}
LLM::~LLM() = default;

Result<std::unique_ptr<LLM>> LLM::create(const LlmArgs& args) {
  EngineOptions o;
  o.model_dir = args.model;
  o.backend = args.backend;
  o.kv_cache_config = args.kv_cache_config;
  o.max_seq_len = args.max_seq_len;
  o.max_num_tokens = args.max_num_tokens;
  o.num_threads = args.num_threads;
  std::unique_ptr<LLM> llm(new LLM());
  LLMRT_ASSIGN_OR_RETURN(llm->impl_->engine, Engine::create(o));
  return llm;
}

const ModelConfig& LLM::modelConfig() const { return impl_->engine->modelConfig(); }
const Tokenizer* LLM::tokenizer() const { return impl_->engine->tokenizer(); }

SamplingParams LLM::defaultSamplingParams() const {
  SamplingParams p;
  const auto& gen = impl_->engine->modelDirectory().generation;
  if (!gen) return p;
  if (gen->do_sample && !*gen->do_sample) p.temperature = 0.0f;
  if (gen->temperature && (!gen->do_sample || *gen->do_sample)) p.temperature = static_cast<float>(*gen->temperature);
  if (gen->top_k) p.top_k = static_cast<int>(*gen->top_k);
  if (gen->top_p) p.top_p = static_cast<float>(*gen->top_p);
  if (gen->min_p) p.min_p = static_cast<float>(*gen->min_p);
  if (gen->repetition_penalty) p.repetition_penalty = static_cast<float>(*gen->repetition_penalty);
  return p;
}

Result<std::vector<double>> LLM::promptLogprobs(const std::vector<TokenId>& token_ids) {
  if (token_ids.size() < 2) return invalidArgument("promptLogprobs: need at least 2 tokens");
  GenerationRequest r;
  r.prompt = token_ids;
  r.params.temperature = 0.0f;
  r.params.max_tokens = 1;
  r.return_context_logits = true;
  LLMRT_ASSIGN_OR_RETURN(std::vector<GenerationOutput> out, llmrt::generate(*impl_->engine, {r}));
  LLMRT_RETURN_IF_ERROR(out[0].status);
  const int64_t vocab = impl_->engine->modelConfig().vocab_size;
  const std::vector<float>& logits = out[0].context_logits;
  if (logits.size() != token_ids.size() * static_cast<size_t>(vocab))
    return internalError("promptLogprobs: context logits have " + std::to_string(logits.size()) + " values; expected " + std::to_string(token_ids.size() * static_cast<size_t>(vocab)));
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

LlmStats LLM::stats() const {
  LlmStats s;
  s.steps = impl_->totals.steps;
  s.context_tokens = impl_->totals.context_tokens;
  s.generated_tokens = impl_->totals.generated_tokens;
  s.seconds = impl_->totals.seconds;
  KvCacheStats kv = impl_->engine->kvCache().stats();
  s.reused_blocks = kv.reused_blocks;
  s.missed_blocks = kv.missed_blocks;
  s.reuse_hit_rate = kv.block_hit_rate;
  s.evicted_blocks = kv.evicted_primary_blocks;
  s.offloaded_blocks = kv.offloaded_blocks;
  s.onboarded_blocks = kv.onboarded_blocks;
  return s;
}

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
  Engine& engine = *impl_->engine;
  std::vector<GenerationRequest> reqs(prompts.size());
  std::vector<Status> prompt_errors(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Prompt& p = prompts[i];
    GenerationRequest& r = reqs[i];
    r.params = sampling_params.size() == 1 ? sampling_params[0] : sampling_params[i];
    if (!options.empty()) {
      const RequestOptions& o = options.size() == 1 ? options[0] : options[i];
      r.retention = o.kv_cache_retention_config;
      r.return_context_logits = o.return_context_logits;
      r.return_generation_logits = o.return_generation_logits;
    }
    if (p.text) {
      if (engine.tokenizer() == nullptr) {
        prompt_errors[i] = failedPrecondition("the model directory has no tokenizer.json; pass token ids");
        continue;
      }
      r.prompt = engine.tokenizer()->encode(*p.text, true);
    } else {
      r.prompt = p.token_ids;
    }
  }
  GenerationStats st;
  LLMRT_ASSIGN_OR_RETURN(std::vector<GenerationOutput> gen, llmrt::generate(engine, reqs, on_token, &st));
  impl_->totals.steps += st.steps;
  impl_->totals.context_tokens += st.context_tokens;
  impl_->totals.generated_tokens += st.generated_tokens;
  impl_->totals.seconds += st.seconds;

  std::vector<RequestOutput> outs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestOutput& o = outs[i];
    GenerationOutput& g = gen[i];
    o.prompt = prompts[i].text.value_or("");
    o.prompt_token_ids = std::move(g.prompt);
    o.status = prompt_errors[i].isOk() ? g.status : prompt_errors[i];
    o.context_logits = std::move(g.context_logits);
    o.cached_tokens = g.num_cached_tokens;
    o.time_to_first_token_s = g.time_to_first_token_s;
    o.total_time_s = g.total_time_s;
    for (size_t s = 0; s < g.sequences.size(); ++s) {
      SequenceOutput& so = g.sequences[s];
      o.outputs.push_back(CompletionOutput{static_cast<int>(s), std::move(so.text), std::move(so.token_ids),
                                           so.finish_reason, std::move(so.logprobs),
                                           std::move(so.generation_logits)});
    }
  }
  return outs;
}

}  // namespace llmrt
