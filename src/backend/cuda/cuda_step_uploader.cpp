#include "backend/cuda/cuda_step_uploader.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_flash_attention.h"
#include "backend/cuda/cuda_kv_pools.h"
#include "backend/cuda/cuda_status.h"

namespace llmrt {
namespace {

// Sections of the per-step upload, each 16-byte aligned.
class Packer {
 public:
  template <typename T>
  size_t add(size_t count) {
    const size_t at = (size_ + 15) & ~size_t{15};
    size_ = at + count * sizeof(T);
    return at;
  }
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
};

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001B3ull + (h >> 29); }

bool isHalf(DType d) { return d == DType::kBF16 || d == DType::kF16; }

// Key splits for `items` decode rows whose longest visible context is `max_keys`: enough CTAs for
// `target` in all, but at least `min_keys` keys per split.
int32_t chooseSplits(int64_t items, int64_t max_keys, int64_t kv_heads, int64_t target, int64_t min_keys) {
  const int64_t ctas = items * kv_heads;
  if (ctas == 0 || ctas * 2 > target) return 1;
  const int64_t want =
      std::min({(target + ctas - 1) / ctas, std::max<int64_t>(1, max_keys / min_keys), int64_t{1024}});
  int32_t splits = 1;  // a power of two, so a few recorded graphs cover every length
  while (static_cast<int64_t>(splits) * 2 <= want) splits *= 2;
  return splits;
}

}  // namespace

Status StepUploader::init() {
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(meta_copied_.out(), cudaEventDisableTiming));
  return Status::ok();
}

Status StepUploader::plan(const StepInputs& inputs, const KvPoolGeometry& geometry, bool use_flash,
                          int64_t split_target, int64_t split_keys) {
  LLMRT_RETURN_IF_ERROR(copyStepInputs(inputs, geometry, step_));
  const int64_t T = step_.numTokens(), S = static_cast<int64_t>(step_.seqs.size());
  const int64_t R = static_cast<int64_t>(step_.logit_rows.size());

  // Attention work lists: context chunks of kFlashMinRows rows or more go to the tensor-core
  // kernel in tiles of kFlashBlockM rows (bf16, fp16 or FP8 cache, head_dim 64 or 128); every other row is an
  // item of the decode kernel.
  constexpr int64_t kFlashMinRows = 16;
  const bool flash =
      use_flash && (isHalf(geometry.dtype) || geometry.dtype == DType::kF8E4M3) &&
      cuda::flashAttentionSupported(kvLayout(geometry), static_cast<int32_t>(geometry.num_kv_heads));
  items_.clear();
  tiles_.clear();
  int64_t item_keys = 0;
  for (int64_t s = 0; s < S; ++s) {
    const HostStep::Seq& q = step_.seqs[static_cast<size_t>(s)];
    if (flash && q.q_len >= kFlashMinRows) {
      for (int64_t r = 0; r < q.q_len; r += cuda::kFlashBlockM)
        tiles_.push_back(int2{static_cast<int>(s), static_cast<int>(r)});
      continue;
    }
    for (int64_t r = 0; r < q.q_len; ++r)
      items_.push_back(int2{static_cast<int>(q.q_start + r), static_cast<int>(s)});
    if (q.q_len > 0) item_keys = std::max(item_keys, q.kv_len);
  }
  splits_ = chooseSplits(static_cast<int64_t>(items_.size()), item_keys, geometry.num_kv_heads, split_target,
                         split_keys);
  single_token_rows_ = true;
  for (const HostStep::Seq& q : step_.seqs) single_token_rows_ = single_token_rows_ && q.q_len <= 1;

  // Layout: sizes fix the offsets; the block tables (whose total length varies
  // from step to step) come last, so a layout hash covers every kernel argument.
  Packer pk;
  at_.ids = pk.add<int32_t>(T);
  at_.pos = pk.add<int32_t>(T);
  at_.row_table = pk.add<int32_t>(T);
  at_.slots = pk.add<int64_t>(T);
  at_.seqs = pk.add<cuda::AttnSeqDev>(S);
  at_.logit = pk.add<int64_t>(R);
  at_.items = pk.add<int2>(items_.size());
  at_.tiles = pk.add<int2>(tiles_.size());
  at_.inv = pk.add<float>(step_.inv_freq.size());
  at_.tables = pk.add<int32_t>(step_.tables.size());
  at_.fed = pk.add<FedToken>(step_.fed.size());  // read only by the feed kernel (upload())
  at_.bytes = pk.size();
  static_assert(sizeof(FedToken) == sizeof(int2));
  return Status::ok();
}

int32_t StepUploader::maxFedSource() const {
  if (step_.fed.empty()) return -1;
  int32_t max_src = 0;
  for (const FedToken& f : step_.fed) max_src = std::max(max_src, f.src);
  return max_src;
}

size_t StepUploader::deviceBytes() const { return std::max(at_.bytes, size_t{1} << 20); }

Status StepUploader::upload(const cuda::ResultTokens& fed_src, cudaStream_t stream) {
  const int64_t T = step_.numTokens(), S = static_cast<int64_t>(step_.seqs.size());
  const int64_t R = static_cast<int64_t>(step_.logit_rows.size());
  const size_t bytes = at_.bytes;
  LLMRT_RETURN_IF_ERROR(pinned_meta_.reserve(bytes, stream));
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(meta_copied_.get()));  // the previous upload has read it
  auto* base = static_cast<uint8_t*>(pinned_meta_.get());
  auto put = [&](size_t off, const void* src, size_t n) {
    if (n) std::memcpy(base + off, src, n);
  };
  put(at_.ids, step_.token_ids.data(), T * sizeof(int32_t));
  put(at_.pos, step_.positions.data(), T * sizeof(int32_t));
  put(at_.row_table, step_.row_rope_table.data(), T * sizeof(int32_t));
  put(at_.slots, step_.slots.data(), T * sizeof(int64_t));
  auto* seqs = reinterpret_cast<cuda::AttnSeqDev*>(base + at_.seqs);
  for (int64_t s = 0; s < S; ++s) {
    const HostStep::Seq& q = step_.seqs[static_cast<size_t>(s)];
    seqs[s] = cuda::AttnSeqDev{static_cast<int32_t>(q.q_start), static_cast<int32_t>(q.q_len),
                               static_cast<int32_t>(q.kv_len), static_cast<int32_t>(q.table_offset)};
  }
  put(at_.logit, step_.logit_rows.data(), R * sizeof(int64_t));
  put(at_.items, items_.data(), items_.size() * sizeof(int2));
  put(at_.tiles, tiles_.data(), tiles_.size() * sizeof(int2));
  put(at_.inv, step_.inv_freq.data(), step_.inv_freq.size() * sizeof(float));
  put(at_.tables, step_.tables.data(), step_.tables.size() * sizeof(int32_t));
  put(at_.fed, step_.fed.data(), step_.fed.size() * sizeof(FedToken));
  LLMRT_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(meta_.get(), pinned_meta_.get(), bytes, cudaMemcpyHostToDevice, stream));
  if (!step_.fed.empty()) {
    auto* d8 = static_cast<uint8_t*>(meta_.get());
    LLMRT_CUDA_RETURN_IF_ERROR(cuda::feedTokens(reinterpret_cast<int32_t*>(d8 + at_.ids),
                                                reinterpret_cast<const int2*>(d8 + at_.fed),
                                                static_cast<int32_t>(step_.fed.size()), fed_src, stream));
  }
  return Status::ok();
}

Status StepUploader::finish(cudaStream_t stream) {
  LLMRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(meta_copied_.get(), stream));

  auto* d = static_cast<uint8_t*>(meta_.get());
  dev_.token_ids = reinterpret_cast<const int32_t*>(d + at_.ids);
  dev_.positions = reinterpret_cast<const int32_t*>(d + at_.pos);
  dev_.row_table = reinterpret_cast<const int32_t*>(d + at_.row_table);
  dev_.slots = reinterpret_cast<const int64_t*>(d + at_.slots);
  dev_.seqs = reinterpret_cast<const cuda::AttnSeqDev*>(d + at_.seqs);
  dev_.logit_rows = reinterpret_cast<const int64_t*>(d + at_.logit);
  dev_.items = reinterpret_cast<const int2*>(d + at_.items);
  dev_.num_items = static_cast<int32_t>(items_.size());
  dev_.tiles = reinterpret_cast<const int2*>(d + at_.tiles);
  dev_.num_tiles = static_cast<int32_t>(tiles_.size());
  dev_.inv_freq = reinterpret_cast<const float*>(d + at_.inv);
  dev_.tables = reinterpret_cast<const int32_t*>(d + at_.tables);
  dev_.splits = splits_;

  const int64_t T = step_.numTokens(), S = static_cast<int64_t>(step_.seqs.size());
  const int64_t R = static_cast<int64_t>(step_.logit_rows.size());
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t v : {static_cast<uint64_t>(T), static_cast<uint64_t>(S), static_cast<uint64_t>(R),
                     static_cast<uint64_t>(items_.size()), static_cast<uint64_t>(tiles_.size()),
                     static_cast<uint64_t>(step_.inv_freq.size()), static_cast<uint64_t>(splits_),
                     static_cast<uint64_t>(step_.rotary_dim), static_cast<uint64_t>(single_token_rows_)})
    h = mix(h, v);
  layout_ = h;
  return Status::ok();
}

}  // namespace llmrt
