#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <cassert>

#include "core/logging.h"
#include "kv/block_key.h"
#include "kv/kv_cache_manager_internal.h"

namespace llmrt {

using detail::kNil;

namespace {
constexpr const char* kWhere = "KvCacheManager";

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

// ---- construction ------------------------------------------------------------

Result<std::unique_ptr<KvCacheManager>> KvCacheManager::create(const KvCacheConfig& config,
                                                               int32_t num_primary_blocks,
                                                               int32_t num_secondary_blocks,
                                                               KvCacheManagerOptions options) {
  assert(config.validate().isOk() && "KvCacheManager::create takes a validated KvCacheConfig");
  if (num_primary_blocks <= 0)
    return fieldError(kWhere, "num_primary_blocks", std::to_string(num_primary_blocks), "> 0");
  if (num_secondary_blocks < 0)
    return fieldError(kWhere, "num_secondary_blocks", std::to_string(num_secondary_blocks), ">= 0");
  if (static_cast<int64_t>(num_primary_blocks) + num_secondary_blocks >= INT32_MAX)
    return fieldError(kWhere, "num_primary_blocks + num_secondary_blocks",
                      std::to_string(static_cast<int64_t>(num_primary_blocks) + num_secondary_blocks),
                      "< 2^31 - 1");
  if (options.max_sequence_length < 0)
    return fieldError(kWhere, "max_sequence_length", std::to_string(options.max_sequence_length), ">= 0");
  if (options.attention_window < 0)
    return fieldError(kWhere, "attention_window", std::to_string(options.attention_window), ">= 0 (0 = no window)");
  return std::unique_ptr<KvCacheManager>(
      new KvCacheManager(config, num_primary_blocks, num_secondary_blocks, options));
}

Result<std::unique_ptr<KvCacheManager>> KvCacheManager::create(const KvCacheConfig& config,
                                                               const KvCacheSizing& sizing,
                                                               KvCacheManagerOptions options) {
  if (sizing.tokens_per_block != config.tokens_per_block)
    return fieldError(kWhere, "sizing.tokens_per_block", std::to_string(sizing.tokens_per_block),
                      "equal to config.tokens_per_block (" + std::to_string(config.tokens_per_block) + ")");
  if (options.max_sequence_length == 0) options.max_sequence_length = sizing.max_sequence_length;
  return create(config, sizing.num_primary_blocks, sizing.num_secondary_blocks, options);
}

namespace {
detail::BlockPool::Params poolParams(const KvCacheConfig& c, int32_t np, int32_t ns, uint64_t mask) {
  detail::BlockPool::Params p;
  p.tokens_per_block = c.tokens_per_block;
  p.num_primary = np;
  p.num_secondary = ns;
  p.offload_min_priority = c.secondary_offload_min_priority;
  p.hash_mask = mask;
  return p;
}
}  // namespace

KvCacheManager::KvCacheManager(const KvCacheConfig& config, int32_t num_primary, int32_t num_secondary,
                               KvCacheManagerOptions options)
    : config_(config),
      options_(options),
      own_clock_(options.clock ? nullptr : std::make_unique<SteadyKvClock>()),
      tpb_(config.tokens_per_block),
      max_blocks_per_seq_(
          options.max_sequence_length > 0
              ? static_cast<int32_t>(ceilDiv(options.max_sequence_length, config.tokens_per_block))
              : 0),
      events_(config.event_buffer_max_size,
              options.attention_window > 0 ? options.attention_window : options.max_sequence_length),
      pool_(poolParams(config, num_primary, num_secondary, options.debug_hash_mask),
            options.clock ? options.clock : own_clock_.get(), &events_),
      scratch_match_(std::make_unique<Match>()) {}

KvCacheManager::~KvCacheManager() = default;

KvCacheManager::Sequence* KvCacheManager::find(SequenceId id) {
  auto it = sequences_.find(id);
  return it == sequences_.end() ? nullptr : it->second.get();
}
const KvCacheManager::Sequence* KvCacheManager::find(SequenceId id) const {
  auto it = sequences_.find(id);
  return it == sequences_.end() ? nullptr : it->second.get();
}

static Status unknownSequence(const char* fn, SequenceId id) {
  return notFound(
      strprintf("%s::%s: no sequence with id %llu", kWhere, fn, static_cast<unsigned long long>(id)));
}

// ---- reuse lookup ------------------------------------------------------------

void KvCacheManager::matchPrefix(std::span<const TokenId> prompt, const SequenceKeyExtras& extras,
                                 Match& out) const {
  out.full.clear();
  out.num_secondary = 0;
  out.partial = {};
  out.reusable_tokens = 0;
  if (!config_.enable_block_reuse) return;
  const int64_t limit = static_cast<int64_t>(prompt.size()) - 1;  // the last prompt token is recomputed
  if (limit <= 0) return;
  int32_t parent = pool_.root();
  uint64_t parent_hash = kRootBlockHash;
  int32_t k = 0;
  while (static_cast<int64_t>(k + 1) * tpb_ <= limit) {
    buildBlockExtras(extras, k, tpb_, scratch_extras_);
    auto toks = prompt.subspan(static_cast<size_t>(k) * tpb_, tpb_);
    const uint64_t h = pool_.hashKey(parent_hash, toks, scratch_extras_);
    const int32_t c = pool_.findChild(parent, h, toks, scratch_extras_);
    if (c == kNil) break;
    if (pool_.at(c).pool == KvPool::kSecondary) {
      if (!config_.onboard_blocks) break;
      ++out.num_secondary;
    }
    out.full.push_back(c);
    parent = c;
    parent_hash = h;
    ++k;
  }
  if (config_.enable_partial_reuse) {
    const int64_t n_max = std::min<int64_t>(tpb_, limit - static_cast<int64_t>(k) * tpb_);
    if (n_max > 0) {
      buildBlockExtras(extras, k, tpb_, scratch_extras_);
      out.partial = pool_.findPartial(parent, prompt.subspan(static_cast<size_t>(k) * tpb_, n_max),
                                      scratch_extras_, config_.onboard_blocks);
    }
  }
  out.reusable_tokens = k * tpb_ + out.partial.num_tokens;
}

PrefixMatch KvCacheManager::lookupPrefix(std::span<const TokenId> prompt,
                                         const SequenceKeyExtras& extras) const {
  Match& m = *scratch_match_;
  matchPrefix(prompt, extras, m);
  PrefixMatch r;
  r.num_reusable_tokens = m.reusable_tokens;
  r.num_full_blocks = static_cast<int32_t>(m.full.size());
  r.num_secondary_blocks = m.num_secondary;
  r.num_partial_tokens = m.partial.num_tokens;
  return r;
}

// ---- sequences ---------------------------------------------------------------

Result<AddSequenceResult> KvCacheManager::addSequence(SequenceId id, std::span<const TokenId> prompt,
                                                      const AddSequenceOptions& options) {
  if (find(id))
    return invalidArgument(strprintf("%s::addSequence: sequence %llu already exists", kWhere,
                                     static_cast<unsigned long long>(id)));
  const int64_t plen = static_cast<int64_t>(prompt.size());
  if (plen == 0) return fieldError(kWhere, "prompt length", "0", ">= 1 token");
  if (options_.max_sequence_length > 0 && plen > options_.max_sequence_length)
    return outOfRange(strprintf("%s::addSequence: prompt of %lld tokens exceeds max_sequence_length %d",
                                kWhere, static_cast<long long>(plen), options_.max_sequence_length));
  if (plen >= INT32_MAX / 2) return fieldError(kWhere, "prompt length", std::to_string(plen), "< 2^30");
  if (options.max_new_tokens < 0)
    return fieldError(kWhere, "max_new_tokens", std::to_string(options.max_new_tokens), ">= 0");
  if (options.num_tokens_to_allocate && *options.num_tokens_to_allocate < 0)
    return fieldError(kWhere, "num_tokens_to_allocate", std::to_string(*options.num_tokens_to_allocate),
                      ">= 0");
  if (options.num_prompt_tokens && (*options.num_prompt_tokens < 1 || *options.num_prompt_tokens > plen))
    return fieldError(kWhere, "num_prompt_tokens", std::to_string(*options.num_prompt_tokens),
                      strprintf("1..%lld (the prompt's length)", static_cast<long long>(plen)));
  // (A request's retention config is validated once, with the request: Executor's intake.)
  assert(!options.retention || options.retention->validate().isOk());
  for (size_t i = 0; i < options.extras.multimodal.size(); ++i) {
    const MultimodalInput& mm = options.extras.multimodal[i];
    if (mm.start < 0 || mm.length <= 0 || static_cast<int64_t>(mm.start) + mm.length > plen)
      return fieldError(
          kWhere, strprintf("extras.multimodal[%zu]", i), strprintf("[%d, +%d)", mm.start, mm.length),
          strprintf("a non-empty range inside the %lld-token prompt", static_cast<long long>(plen)));
  }
  const int32_t P = static_cast<int32_t>(plen);

  Match& m = *scratch_match_;
  matchPrefix(prompt, options.extras, m);
  const int32_t k = static_cast<int32_t>(m.full.size());
  const int32_t R = m.reusable_tokens;
  const bool partial = m.partial.num_tokens > 0;
  const int32_t chunk = std::min(options.num_tokens_to_allocate.value_or(P), P - R);
  const int32_t total_blocks =
      std::max(static_cast<int32_t>(ceilDiv(R + chunk, tpb_)), k + (partial ? 1 : 0));
  const int32_t need = m.num_secondary + (total_blocks - k);

  // Pin what we matched so the evictions our own allocations cause cannot take it.
  for (int32_t b : m.full) pool_.pin(b);
  if (partial) pool_.pin(m.partial.block);
  if (pool_.numAvailable() < need) {
    if (partial) pool_.unpin(m.partial.block);
    for (auto it = m.full.rbegin(); it != m.full.rend(); ++it) pool_.unpin(*it);
    ++alloc_failures_;
    LLMRT_LOG_DEBUG("KV cache: sequence %llu needs %d blocks, %d available: %s",
                    static_cast<unsigned long long>(id), need, pool_.numAvailable(),
                    kvAllocStatusMessage(KvAllocStatus::kNoFreeBlocks).data());
    AddSequenceResult r;
    r.status = KvAllocStatus::kNoFreeBlocks;
    return r;
  }

  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  seq->num_prompt = P;
  seq->num_request_prompt = options.num_prompt_tokens.value_or(P);
  seq->max_new_tokens = options.max_new_tokens;
  seq->tokens.reserve(static_cast<size_t>(P) + options.max_new_tokens);
  seq->tokens.assign(prompt.begin(), prompt.end());
  const size_t expect_blocks =
      static_cast<size_t>(ceilDiv(static_cast<int64_t>(P) + options.max_new_tokens, tpb_));
  seq->blocks.reserve(expect_blocks);
  seq->table.reserve(expect_blocks);
  if (options.retention) {
    seq->retention = *options.retention;
    auto& ranges = seq->retention->token_range_retention_configs;
    std::sort(ranges.begin(), ranges.end(),
              [](const auto& a, const auto& b) { return a.token_start < b.token_start; });
  }
  seq->extras = options.extras;

  AddSequenceResult result;
  for (int32_t b : m.full) {
    if (pool_.at(b).pool == KvPool::kSecondary) {
      const bool ok = pool_.onboard(b);
      assert(ok && "availability was checked");
      (void)ok;
      ++result.num_onboarded_blocks;
    }
    seq->blocks.push_back(b);
    seq->table.push_back(pool_.at(b).slot);
  }
  if (partial) {
    const int32_t d = pool_.allocate();
    assert(d != kNil);
    const detail::PoolBlock& src = pool_.at(m.partial.block);
    pool_.addCopy({src.pool, src.slot, KvPool::kPrimary, pool_.at(d).slot, m.partial.num_tokens});
    pool_.release(m.partial.block, nullptr);  // a use: refreshes its LRU stamp
    seq->blocks.push_back(d);
    seq->table.push_back(pool_.at(d).slot);
  }
  while (static_cast<int32_t>(seq->blocks.size()) < total_blocks) {
    const int32_t b = pool_.allocate();
    assert(b != kNil);
    seq->blocks.push_back(b);
    seq->table.push_back(pool_.at(b).slot);
  }
  seq->num_allocated = R + chunk;
  seq->num_computed = R;
  seq->num_reused = R;
  seq->num_stored = k;
  seq->store_parent = k > 0 ? m.full.back() : pool_.root();
  seq->store_parent_gen = pool_.at(seq->store_parent).generation;
  seq->storing = config_.enable_block_reuse;

  const int32_t prompt_blocks = static_cast<int32_t>(ceilDiv(P, tpb_));
  reused_blocks_ += k + (partial ? 1 : 0);
  partial_reused_blocks_ += partial ? 1 : 0;
  missed_blocks_ += prompt_blocks - k - (partial ? 1 : 0);
  reused_tokens_ += R;
  missed_tokens_ += P - R;

  releaseOutOfWindow(*seq);
  LLMRT_LOG_DEBUG(
      "KV cache: sequence %llu reuses %d of %d prompt tokens (%d blocks, %d onboarded, %d partial)",
      static_cast<unsigned long long>(id), R, P, k, result.num_onboarded_blocks, m.partial.num_tokens);

  result.num_reused_tokens = R;
  result.num_reused_blocks = k;
  result.num_partial_tokens = m.partial.num_tokens;
  result.num_allocated_tokens = seq->num_allocated;
  sequences_.emplace(id, std::move(seq));
  return result;
}

KvAllocStatus KvCacheManager::extend(Sequence& seq, int32_t num_tokens) {
  releaseOutOfWindow(seq);
  const int64_t new_total = static_cast<int64_t>(seq.num_allocated) + num_tokens;
  const int64_t need = ceilDiv(new_total, tpb_) - static_cast<int64_t>(seq.blocks.size());
  if (need > 0) {
    if (pool_.numAvailable() < need) {
      ++alloc_failures_;
      LLMRT_LOG_DEBUG("KV cache: sequence %llu needs %lld blocks, %d available: %s",
                      static_cast<unsigned long long>(seq.id), static_cast<long long>(need),
                      pool_.numAvailable(), kvAllocStatusMessage(KvAllocStatus::kNoFreeBlocks).data());
      return KvAllocStatus::kNoFreeBlocks;
    }
    for (int64_t i = 0; i < need; ++i) {
      const int32_t b = pool_.allocate();
      assert(b != kNil);
      seq.blocks.push_back(b);
      seq.table.push_back(pool_.at(b).slot);
    }
  }
  seq.num_allocated = static_cast<int32_t>(new_total);
  return KvAllocStatus::kOk;
}

Result<KvAllocStatus> KvCacheManager::allocatePromptTokens(SequenceId id, int32_t num_tokens) {
  Sequence* seq = find(id);
  if (!seq) return unknownSequence("allocatePromptTokens", id);
  if (num_tokens < 0 || num_tokens > seq->num_prompt - seq->num_allocated)
    return fieldError(
        kWhere, "allocatePromptTokens num_tokens", std::to_string(num_tokens),
        strprintf("0..%d (prompt tokens not yet allocated)", seq->num_prompt - seq->num_allocated));
  if (num_tokens == 0) return KvAllocStatus::kOk;
  return extend(*seq, num_tokens);
}

Result<KvAllocStatus> KvCacheManager::appendTokens(SequenceId id, std::span<const TokenId> tokens) {
  Sequence* seq = find(id);
  if (!seq) return unknownSequence("appendTokens", id);
  if (seq->num_allocated != static_cast<int32_t>(seq->tokens.size()))
    return failedPrecondition(
        strprintf("%s::appendTokens: sequence %llu has %d of %zu tokens allocated; allocate "
                  "the rest of the prompt first",
                  kWhere, static_cast<unsigned long long>(id), seq->num_allocated, seq->tokens.size()));
  const int64_t new_len = static_cast<int64_t>(seq->tokens.size()) + static_cast<int64_t>(tokens.size());
  if ((options_.max_sequence_length > 0 && new_len > options_.max_sequence_length) ||
      new_len >= INT32_MAX / 2)
    return outOfRange(strprintf(
        "%s::appendTokens: sequence %llu would reach %lld tokens; max_sequence_length is %d", kWhere,
        static_cast<unsigned long long>(id), static_cast<long long>(new_len), options_.max_sequence_length));
  if (tokens.empty()) return KvAllocStatus::kOk;
  const size_t old_len = seq->tokens.size();
  seq->tokens.insert(seq->tokens.end(), tokens.begin(), tokens.end());
  const KvAllocStatus st = extend(*seq, static_cast<int32_t>(tokens.size()));
  if (st != KvAllocStatus::kOk) seq->tokens.resize(old_len);
  return st;
}

Status KvCacheManager::resolveToken(SequenceId id, int32_t pos, TokenId token) {
  Sequence* seq = find(id);
  if (!seq) return unknownSequence("resolveToken", id);
  if (pos < seq->num_computed || pos >= static_cast<int32_t>(seq->tokens.size()))
    return fieldError(kWhere, "resolveToken pos", std::to_string(pos),
                      strprintf("%d..%zu (tokens not yet computed)", seq->num_computed, seq->tokens.size() - 1));
  seq->tokens[static_cast<size_t>(pos)] = token;
  return Status::ok();
}

Status KvCacheManager::markComputed(SequenceId id, int32_t num_tokens) {
  Sequence* seq = find(id);
  if (!seq) return unknownSequence("markComputed", id);
  if (num_tokens < 0 || num_tokens > seq->num_allocated - seq->num_computed)
    return fieldError(
        kWhere, "markComputed num_tokens", std::to_string(num_tokens),
        strprintf("0..%d (allocated, not yet computed tokens)", seq->num_allocated - seq->num_computed));
  seq->num_computed += num_tokens;
  storeFullBlocks(*seq);
  releaseOutOfWindow(*seq);
  return Status::ok();
}

void KvCacheManager::storeFullBlocks(Sequence& seq) {
  if (!seq.storing) return;
  while (static_cast<int64_t>(seq.num_stored + 1) * tpb_ <= seq.num_computed) {
    const int32_t i = seq.num_stored;
    const int32_t b = seq.blocks[i];
    // The chain breaks if the prefix block we hang off left the tree or the primary pool.
    if (b == kNil || !pool_.isLive(seq.store_parent, seq.store_parent_gen) ||
        pool_.at(seq.store_parent).pool != KvPool::kPrimary) {
      seq.storing = false;
      return;
    }
    buildBlockExtras(seq.extras, i, tpb_, scratch_extras_);
    std::span<const TokenId> toks(seq.tokens.data() + static_cast<size_t>(i) * tpb_, tpb_);
    const uint64_t h = pool_.hashKey(pool_.at(seq.store_parent).hash, toks, scratch_extras_);
    int32_t node = pool_.findChild(seq.store_parent, h, toks, scratch_extras_);
    if (node == kNil) {
      const int32_t priority =
          seq.retention ? retentionFor(seq, i).priority : KvCacheRetentionConfig::kDefaultPriority;
      pool_.insert(b, seq.store_parent, h, toks, scratch_extras_, priority, seq.extras.lora_id);
      node = b;
    } else if (pool_.at(node).pool == KvPool::kPrimary) {
      // An equal block is already in the tree (another sequence computed the
      // same prefix at the same time). The key is the whole token prefix plus
      // extras, so its KV equals ours: take a reference on the twin, put it in
      // our table and free our private copy. Later blocks then hang under a
      // block this sequence holds, so storing them locks nothing new and
      // free + reclaimable never shrinks here (it grows by one when the twin
      // was already locked). Our copy was never stored: no event for it.
      pool_.pin(node);
      pool_.release(b, nullptr);
      seq.blocks[i] = node;
      seq.table[i] = pool_.at(node).slot;
    } else {
      // The twin sits in the secondary pool. Onboarding would take a primary
      // block (maybe by eviction) for KV we already hold, and a primary block
      // cannot hang under a secondary one: keep our copy private and stop
      // storing this sequence (its remaining blocks stay private, as after a
      // broken chain). Nothing is locked on anyone's behalf.
      seq.storing = false;
      return;
    }
    seq.store_parent = node;
    seq.store_parent_gen = pool_.at(node).generation;
    ++seq.num_stored;
  }
}

void KvCacheManager::releaseOutOfWindow(Sequence& seq) {
  const int32_t window = options_.attention_window;
  if (window <= 0) return;
  // The next token to compute (position num_computed) attends to positions
  // [num_computed - W + 1, num_computed]; later tokens only further right.
  const int64_t first_needed = static_cast<int64_t>(seq.num_computed) - window + 1;
  const int32_t n = static_cast<int32_t>(seq.blocks.size());
  while (seq.first_held < n && static_cast<int64_t>(seq.first_held + 1) * tpb_ <= first_needed) {
    releaseBlock(seq, seq.first_held);
    ++seq.first_held;
    // Blocks stored from now on would hang below released blocks; reuse of a
    // windowed sequence is limited to the prefix stored before its first release.
    seq.storing = false;
  }
}

detail::RetentionUpdate KvCacheManager::retentionFor(const Sequence& seq, int32_t block_index) const {
  detail::RetentionUpdate u;
  const KvCacheRetentionConfig& rc = *seq.retention;
  const int64_t first_token = static_cast<int64_t>(block_index) * tpb_;
  if (first_token >= seq.num_request_prompt) {
    u.priority = rc.decode_retention_priority;
    u.duration_ms = rc.decode_duration_ms;
    return u;
  }
  const auto& ranges = rc.token_range_retention_configs;
  auto it = std::upper_bound(ranges.begin(), ranges.end(), first_token,
                             [](int64_t t, const TokenRangeRetentionConfig& r) { return t < r.token_start; });
  if (it != ranges.begin()) {
    const TokenRangeRetentionConfig& r = *std::prev(it);
    if (first_token < r.token_end.value_or(seq.num_request_prompt)) {
      u.priority = r.priority;
      u.duration_ms = r.duration_ms;
    }
  }
  return u;
}

void KvCacheManager::releaseBlock(Sequence& seq, int32_t index) {
  const int32_t b = seq.blocks[index];
  if (b == kNil) return;
  if (seq.retention) {
    const detail::RetentionUpdate u = retentionFor(seq, index);
    pool_.release(b, &u);
  } else {
    pool_.release(b, nullptr);
  }
  seq.blocks[index] = kNil;
  seq.table[index] = kNoBlock;
}

Status KvCacheManager::removeSequence(SequenceId id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) return unknownSequence("removeSequence", id);
  Sequence& seq = *it->second;
  // Last block first: the prefix's first blocks end up most recently used.
  for (int32_t i = static_cast<int32_t>(seq.blocks.size()) - 1; i >= seq.first_held; --i)
    releaseBlock(seq, i);
  sequences_.erase(it);
  return Status::ok();
}

std::span<const BlockId> KvCacheManager::blockTable(SequenceId id) const {
  const Sequence* seq = find(id);
  if (!seq) return {};
  return seq->table;
}

int32_t KvCacheManager::numReusedTokens(SequenceId id) const {
  const Sequence* s = find(id);
  return s ? s->num_reused : -1;
}
int32_t KvCacheManager::numComputedTokens(SequenceId id) const {
  const Sequence* s = find(id);
  return s ? s->num_computed : -1;
}
int32_t KvCacheManager::numAllocatedTokens(SequenceId id) const {
  const Sequence* s = find(id);
  return s ? s->num_allocated : -1;
}
int32_t KvCacheManager::numTokens(SequenceId id) const {
  const Sequence* s = find(id);
  return s ? static_cast<int32_t>(s->tokens.size()) : -1;
}

// ---- admission control -------------------------------------------------------

int32_t KvCacheManager::peakBlocks(int64_t total_tokens, int32_t max_chunk) const {
  const int64_t full = ceilDiv(total_tokens, tpb_);
  if (options_.attention_window <= 0) return static_cast<int32_t>(full);
  // Held at once: the window behind the first token of a chunk plus the chunk,
  // which can straddle one more block boundary.
  const int64_t span = static_cast<int64_t>(options_.attention_window) - 1 + std::max(1, max_chunk);
  return static_cast<int32_t>(std::min(full, ceilDiv(span, tpb_) + 1));
}

int32_t KvCacheManager::numBlocksNeededToComplete(SequenceId id) const {
  const Sequence* s = find(id);
  if (!s) return 0;
  const int64_t target = std::max<int64_t>(static_cast<int64_t>(s->tokens.size()),
                                           static_cast<int64_t>(s->num_prompt) + s->max_new_tokens);
  const int32_t held = static_cast<int32_t>(s->blocks.size()) - s->first_held;
  const int32_t peak = peakBlocks(target, s->num_prompt - s->num_allocated);
  const int32_t already = options_.attention_window > 0 ? held : static_cast<int32_t>(s->blocks.size());
  return std::max(0, peak - already);
}

int32_t KvCacheManager::numBlocksNeeded(int32_t prompt_len, int32_t max_new_tokens) const {
  return peakBlocks(static_cast<int64_t>(std::max(0, prompt_len)) + std::max(0, max_new_tokens),
                    std::max(1, prompt_len));
}

// ---- copies --------------------------------------------------------------------

Status KvCacheManager::flushCopies() {
  auto& pending = pool_.pendingCopies();
  if (pending.empty()) return Status::ok();
  if (!options_.copier)
    return failedPrecondition(
        strprintf("%s::flushCopies: %zu block copies pending but no KvBlockCopier was given; "
                  "use takePendingCopies()",
                  kWhere, pending.size()));
  Status st = options_.copier->copyBlocks(pending);
  pending.clear();
  return st;
}

std::vector<KvBlockCopy> KvCacheManager::takePendingCopies() {
  std::vector<KvBlockCopy> out;
  out.swap(pool_.pendingCopies());
  return out;
}

// ---- observability -------------------------------------------------------------

KvCacheStats KvCacheManager::stats() const {
  KvCacheStats s;
  s.tokens_per_block = tpb_;
  s.num_sequences = static_cast<int32_t>(sequences_.size());
  auto fill = [&](KvPool p, KvPoolStats& o) {
    o.total = pool_.numBlocks(p);
    o.free = pool_.numFree(p);
    o.used = pool_.numUsed(p);
    o.cached = pool_.numCached(p);
  };
  fill(KvPool::kPrimary, s.primary);
  fill(KvPool::kSecondary, s.secondary);
  s.primary.reclaimable = pool_.numReclaimable();
  s.reused_blocks = reused_blocks_;
  s.partial_reused_blocks = partial_reused_blocks_;
  s.missed_blocks = missed_blocks_;
  s.reused_tokens = reused_tokens_;
  s.missed_tokens = missed_tokens_;
  if (reused_blocks_ + missed_blocks_ > 0)
    s.block_hit_rate =
        static_cast<double>(reused_blocks_) / static_cast<double>(reused_blocks_ + missed_blocks_);
  if (reused_tokens_ + missed_tokens_ > 0)
    s.token_hit_rate =
        static_cast<double>(reused_tokens_) / static_cast<double>(reused_tokens_ + missed_tokens_);
  const auto& c = pool_.counters();
  s.evicted_primary_blocks = c.evicted_primary;
  s.evicted_secondary_blocks = c.evicted_secondary;
  s.offloaded_blocks = c.offloaded;
  s.onboarded_blocks = c.onboarded;
  s.allocation_failures = alloc_failures_;
  s.events_dropped = events_.dropped();
  return s;
}

}  // namespace llmrt
