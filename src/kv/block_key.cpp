#include "kv/block_key.h"

#include <cstring>

namespace llmrt {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

// Tags keep the encodings of different extras from colliding as word strings.
constexpr uint64_t kTagLora = 0x4c4f5241'00000001ULL;
constexpr uint64_t kTagSalt = 0x53414c54'00000002ULL;
constexpr uint64_t kTagMultimodal = 0x4d4d4954'00000003ULL;

}  // namespace

uint64_t hashBlockKey(uint64_t parent_hash, std::span<const TokenId> tokens,
                      std::span<const uint64_t> extras) {
  // Two independent lanes halve the dependency chain; both see the length.
  uint64_t a = mix64(parent_hash ^ (kGolden * (tokens.size() + 1)));
  uint64_t b = mix64(parent_hash + kGolden + extras.size());
  size_t i = 0;
  const size_t n = tokens.size();
  for (; i + 4 <= n; i += 4) {
    uint64_t w0 = static_cast<uint32_t>(tokens[i]) |
                  (static_cast<uint64_t>(static_cast<uint32_t>(tokens[i + 1])) << 32);
    uint64_t w1 = static_cast<uint32_t>(tokens[i + 2]) |
                  (static_cast<uint64_t>(static_cast<uint32_t>(tokens[i + 3])) << 32);
    a = mix64(a ^ w0);
    b = mix64(b ^ w1);
  }
  for (; i < n; ++i) a = mix64(a ^ (static_cast<uint32_t>(tokens[i]) | (uint64_t{1} << 32)));
  for (uint64_t w : extras) b = mix64(b ^ w);
  return mix64(a ^ (b * kGolden) ^ (b >> 29));
}

void buildBlockExtras(const SequenceKeyExtras& extras, int32_t block_index, int32_t tokens_per_block,
                      std::vector<uint64_t>& out) {
  out.clear();
  if (extras.empty()) return;
  if (block_index == 0) {
    if (extras.lora_id) {
      out.push_back(kTagLora);
      out.push_back(*extras.lora_id);
    }
    if (extras.cache_salt) {
      const std::string& s = *extras.cache_salt;
      out.push_back(kTagSalt);
      out.push_back(s.size());
      for (size_t off = 0; off < s.size(); off += 8) {
        uint64_t w = 0;
        std::memcpy(&w, s.data() + off, std::min<size_t>(8, s.size() - off));
        out.push_back(w);
      }
    }
  }
  const int64_t block_start = static_cast<int64_t>(block_index) * tokens_per_block;
  const int64_t block_end = block_start + tokens_per_block;
  for (const MultimodalInput& mm : extras.multimodal) {
    if (mm.start >= block_end || static_cast<int64_t>(mm.start) + mm.length <= block_start) continue;
    out.push_back(kTagMultimodal);
    out.insert(out.end(), mm.hash.begin(), mm.hash.end());
    out.push_back(static_cast<uint64_t>(static_cast<int64_t>(mm.start) - block_start));
    out.push_back(static_cast<uint64_t>(mm.length));
  }
}

}  // namespace llmrt
