// Python str operations on UTF-8 strings (code-point based, as Python's str): case mapping,
// strip, split, and the character classes, shared by the filters and the str methods.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llmrt::tmpl {

std::string pyUpper(std::string_view s);
std::string pyLower(std::string_view s);
std::string pyCapitalize(std::string_view s);
std::string pyTitle(std::string_view s);  // str.title()
// `chars` nullopt: whitespace. which: 0 both, 1 left, 2 right.
std::string pyStrip(std::string_view s, const std::optional<std::string>& chars, int which);
// str.split / str.rsplit; sep nullopt splits on whitespace runs.
std::vector<std::string> pySplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                                 bool from_right);
std::vector<std::string> pySplitlines(std::string_view s, bool keepends);
// str.replace with count (< 0: all); fails when the result would exceed `max_bytes`.
std::string pyReplace(std::string_view s, std::string_view old, std::string_view repl, int64_t count,
                      size_t max_bytes);
bool isPyAlpha(uint32_t cp);
bool isPyDigit(uint32_t cp);
bool isPyAlnum(uint32_t cp);
bool isPyLower(uint32_t cp);
bool isPyUpper(uint32_t cp);
// Byte offset of code point `cp_index` in s (clamped to the end).
size_t byteOffset(std::string_view s, int64_t cp_index);
// Code-point index of byte offset `byte` in s.
int64_t cpIndex(std::string_view s, size_t byte);

}  // namespace llmrt::tmpl
