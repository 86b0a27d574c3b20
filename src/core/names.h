// "Did you mean ...?": the known name nearest to a misspelt one.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace llmrt {

// The name in `known` with the smallest edit distance to `given` (insertions, deletions,
// substitutions and swaps of adjacent characters, case-insensitive), when that distance is at
// most max(2, |given| / 3); nullopt otherwise (a guess that far off would mislead).
std::optional<std::string> nearestName(std::string_view given, std::span<const std::string_view> known);

// ", did you mean 'x'?" for nearestName's answer, else "".
std::string didYouMean(std::string_view given, std::span<const std::string_view> known);

}  // namespace llmrt
