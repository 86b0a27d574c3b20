#include "core/names.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace llmrt {
namespace {

// Optimal string alignment distance (Damerau-Levenshtein without repeated edits of a substring).
size_t editDistance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  auto low = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = low(a[i - 1]) == low(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && low(a[i - 1]) == low(b[j - 2]) && low(a[i - 2]) == low(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

}  // namespace

std::optional<std::string> nearestName(std::string_view given, std::span<const std::string_view> known) {
  if (given.size() > 256) return std::nullopt;  // no name is that long; keep the table small
  std::optional<std::string> best;
  size_t best_d = std::max<size_t>(2, given.size() / 3) + 1;
  for (std::string_view k : known) {
    if (k.size() > 256) continue;
    const size_t d = editDistance(given, k);
    if (d < best_d) {
      best_d = d;
      best = std::string(k);
    }
  }
  return best;
}

std::string didYouMean(std::string_view given, std::span<const std::string_view> known) {
  std::optional<std::string> n = nearestName(given, known);
  return n ? ", did you mean '" + *n + "'?" : "";
}

}  // namespace llmrt
