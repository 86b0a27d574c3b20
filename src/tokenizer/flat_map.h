// Open-addressing hash maps for the BPE hot path: byte strings -> ids (keys
// live in one arena, no per-key allocation) and id pairs -> merge (rank, id).
// Built once at load; lookups are read-only and thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace llmrt::tok {

// 64-bit hash of a short byte string (8 bytes per step, then a final mix).
inline uint64_t hashBytes(const char* p, size_t n) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = 0x243F6A8885A308D3ull ^ (n * kMul);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 31;
  return h;
}

inline uint64_t hashBytes(std::string_view s) { return hashBytes(s.data(), s.size()); }

// Equality of two short byte ranges without a libc call.
inline bool bytesEqual(const char* a, const char* b, size_t n) {
  while (n >= 8) {
    uint64_t x, y;
    std::memcpy(&x, a, 8);
    std::memcpy(&y, b, 8);
    if (x != y) return false;
    a += 8;
    b += 8;
    n -= 8;
  }
  while (n > 0) {
    if (*a++ != *b++) return false;
    --n;
  }
  return true;
}

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  x ^= x >> 33;
  return x;
}

class StringIdMap {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  size_t size() const { return size_; }

  // Inserts or overwrites (the last value for a key wins, as with a JSON object).
  void insert(std::string_view key, int32_t id) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    uint64_t h = hashBytes(key);
    size_t i = h & mask_;
    while (slots_[i].id >= 0) {
      if (slots_[i].hash == h && view(slots_[i]) == key) {
        slots_[i].id = id;
        return;
      }
      i = (i + 1) & mask_;
    }
    Slot& s = slots_[i];
    s.hash = h;
    s.off = static_cast<uint32_t>(arena_.size());
    s.len = static_cast<uint32_t>(key.size());
    s.id = id;
    arena_.append(key);
    ++size_;
  }

  // Returns the id for `key`, or -1.
  int32_t find(std::string_view key) const {
    if (size_ == 0) return -1;
    uint64_t h = hashBytes(key);
    size_t i = h & mask_;
    while (slots_[i].id >= 0) {
      if (slots_[i].hash == h && slots_[i].len == key.size() &&
          bytesEqual(arena_.data() + slots_[i].off, key.data(), key.size()))
        return slots_[i].id;
      i = (i + 1) & mask_;
    }
    return -1;
  }

  template <typename F>
  void forEach(F&& fn) const {
    for (const Slot& s : slots_)
      if (s.id >= 0) fn(view(s), s.id);
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t off = 0;
    uint32_t len = 0;
    int32_t id = -1;
  };
  std::string_view view(const Slot& s) const { return std::string_view(arena_).substr(s.off, s.len); }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    size_t cap = old.empty() ? 16 : old.size() * 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    for (const Slot& s : old) {
      if (s.id < 0) continue;
      size_t i = s.hash & mask_;
      while (slots_[i].id >= 0) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  std::string arena_;
};

// (left id, right id) -> (merge rank, merged id).
class PairMap {
 public:
  struct Value {
    uint32_t rank;
    int32_t id;
  };

  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  size_t size() const { return size_; }

  // Inserts or overwrites (a later duplicate merge replaces the earlier one).
  void insert(int32_t a, int32_t b, Value v) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    uint64_t key = pack(a, b);
    size_t i = mix64(key) & mask_;
    while (slots_[i].key != kEmpty) {
      if (slots_[i].key == key) {
        slots_[i].value = v;
        return;
      }
      i = (i + 1) & mask_;
    }
    slots_[i] = Slot{key, v};
    ++size_;
  }

  const Value* find(int32_t a, int32_t b) const {
    if (size_ == 0) return nullptr;
    uint64_t key = pack(a, b);
    size_t i = mix64(key) & mask_;
    while (true) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
      i = (i + 1) & mask_;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  struct Slot {
    uint64_t key = kEmpty;
    Value value{0, -1};
  };
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    size_t cap = old.empty() ? 16 : old.size() * 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    for (const Slot& s : old) {
      if (s.key == kEmpty) continue;
      size_t i = mix64(s.key) & mask_;
      while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace llmrt::tok
