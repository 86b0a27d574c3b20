// SentencePiece tokenizer.model files (Llama-1/2 and Mistral repositories
// without tokenizer.json, InternLM2, Baichuan, ChatGLM2/3) through
// libsentencepiece, behind the Tokenizer interface, with what HF's slow
// tokenizers add around it from tokenizer_config.json:
//   - added tokens (added_tokens_decoder, the named special tokens, and the
//     model's BOS / EOS / UNK pieces) are found in the text first, as HF's
//     slow tokenizers do; each stretch between them is sp.encode()d. With
//     "legacy": false a stretch that follows an added token gets no dummy
//     prefix ("▁"), as LlamaTokenizer(legacy=False).
//   - add_special_tokens prepends BOS when add_bos_token (default true; the
//     model must have a BOS piece) and appends EOS when add_eos_token (default
//     false). ChatGLMTokenizer: the specials [MASK] [gMASK] [sMASK] sop eop
//     <|system|> <|user|> <|assistant|> <|observation|> follow the pieces
//     (unless added_tokens_decoder names them) and the prefix is [gMASK] sop.
//   - decode joins the pieces with "▁" as a space, byte pieces <0xXX> as
//     bytes (a run that is not valid UTF-8 becomes one U+FFFD per byte) and
//     drops the leading space of the text when the model adds a dummy prefix:
//     what the tokenizer.json HF converts from the same model decodes to.
//     Control and unknown pieces and special added tokens count as special
//     (skip_special_tokens drops them); otherwise they decode as their text.
//     ChatGLM / InternLM2 / Baichuan tokenizers (tokenizer_class), whose slow
//     tokenizers sp.decode each run of pieces between special tokens, also drop
//     the dummy-prefix space of a run that follows a special token.
// The file is checked first (sp_model_proto.h): a truncated or corrupt model
// is a one-line kParseError naming it.
#pragma once

#include <memory>
#include <string_view>

#include "llmrt/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace llmrt::tok {

// True when this build links libsentencepiece (LLMRT_SENTENCEPIECE).
bool sentencePieceSupported();

// Loads a tokenizer.model from its bytes; `config` may be null (no
// tokenizer_config.json). Without SentencePiece in the build: kUnimplemented.
Result<std::unique_ptr<Tokenizer>> loadSentencePiece(std::string_view bytes, std::string_view source,
                                                     const TokenizerConfig* config);

}  // namespace llmrt::tok
