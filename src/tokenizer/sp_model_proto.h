// A check of a SentencePiece tokenizer.model before libsentencepiece parses
// it: the file must be a well-formed ModelProto (protobuf wire format: every
// field's tag, varint and length inside the file, and inside each piece and
// spec message) with at least one piece, a trainer_spec and a normalizer_spec.
// A file cut short fails here with a message that says so: protobuf writes the
// pieces first and the specs after them, so a cut anywhere in the pieces or
// specs leaves either a field running past the end or a missing spec. Also
// reads the few settings the tokenizer needs and the library does not expose,
// and can append a normalizer_spec override (protobuf merges a repeated
// message field into the first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "llmrt/status.h"

namespace llmrt::tok {

struct SpModelInfo {
  size_t num_pieces = 0;
  int model_type = 1;  // trainer_spec.model_type: 1 unigram, 2 BPE, 3 word, 4 char
  bool byte_fallback = false;
  bool add_dummy_prefix = true;  // normalizer_spec.add_dummy_prefix
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// Checks `bytes` (the whole file) and returns its settings; errors
// (kParseError) are one line naming `source` and the byte offset.
Result<SpModelInfo> scanSpModelProto(std::string_view bytes, std::string_view source);

// `bytes` with normalizer_spec.add_dummy_prefix set to `value` (by appending a
// normalizer_spec field that protobuf merges into the existing one).
std::string withAddDummyPrefix(std::string_view bytes, bool value);

}  // namespace llmrt::tok
