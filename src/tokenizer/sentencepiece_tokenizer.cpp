// Built only with LLMRT_SENTENCEPIECE (tokenizer_files.cpp has the stand-ins otherwise).
#include "tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <new>

#include "core/logging.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/json_util.h"
#include "tokenizer/sp_model_proto.h"
#include "tokenizer/unicode.h"

namespace llmrt::tok {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581, SentencePiece's space
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// ChatGLM2/3's specials, in id order after the pieces (tokenization_chatglm.py).
constexpr const char* kChatGlmSpecials[] = {"[MASK]",   "[gMASK]",       "[sMASK]",
                                            "sop",      "eop",           "<|system|>",
                                            "<|user|>", "<|assistant|>", "<|observation|>"};

std::string spaceToBlank(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  size_t i = 0;
  while (i < piece.size()) {
    if (piece.compare(i, kSpaceSymbol.size(), kSpaceSymbol) == 0) {
      out.push_back(' ');
      i += kSpaceSymbol.size();
    } else {
      out.push_back(piece[i++]);
    }
  }
  return out;
}

class SentencePieceTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<SentencePieceTokenizer>> load(std::string_view bytes, std::string_view source,
                                                              const TokenizerConfig* config);

  Result<std::vector<TokenId>> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(const std::vector<TokenId>& ids, bool skip_special_tokens) const override;
  size_t vocabSize() const override { return vocab_size_; }
  std::optional<TokenId> tokenToId(std::string_view token) const override;
  std::optional<std::string> idToToken(TokenId id) const override;
  bool isSpecial(TokenId id) const override;
  std::vector<TokenId> specialPrefixIds() const override { return prefix_; }
  std::vector<TokenId> specialSuffixIds() const override { return suffix_; }
  std::vector<AddedTokenInfo> addedTokens() const override;

 private:
  enum class Kind : uint8_t { kText, kByte, kControl, kUnknown };
  SentencePieceTokenizer() = default;
  static Result<std::unique_ptr<sentencepiece::SentencePieceProcessor>> makeProcessor(
      std::string_view bytes, std::string_view source);
  Status loadAddedTokens(const TokenizerConfig* config);
  void addToken(const AddedTokenInfo& info);
  std::optional<TokenId> pieceId(std::string_view piece) const;
  Status encodeText(std::string_view text, bool dummy_prefix, std::vector<TokenId>& ids) const;

  std::string source_;
  SpModelInfo info_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  // The same model without the dummy prefix, for "legacy": false (null otherwise).
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_no_prefix_;
  bool legacy_ = true;
  bool chatglm_ = false;
  // Drop the dummy-prefix space of a text run that follows an added or special token, as the
  // slow tokenizers of the families without tokenizer.json do (sp.decode per run).
  bool strip_after_special_ = false;
  TokenId piece_count_ = 0;
  std::vector<std::string> pieces_;  // id -> piece
  std::vector<Kind> kinds_;          // id -> how decode treats it
  std::vector<uint8_t> byte_of_;     // id -> the byte of a <0xXX> piece
  AddedVocabulary added_;
  std::vector<TokenId> prefix_, suffix_;
  size_t vocab_size_ = 0;
};

Result<std::unique_ptr<sentencepiece::SentencePieceProcessor>> SentencePieceTokenizer::makeProcessor(
    std::string_view bytes, std::string_view source) {
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const sentencepiece::util::Status st = sp->LoadFromSerializedProto(bytes);
  if (!st.ok()) {
    return parseError(std::string(source) +
                      ": not a usable SentencePiece model: " + boundedText(st.ToString(), 400));
  }
  return sp;
}

Result<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::load(std::string_view bytes,
                                                                             std::string_view source,
                                                                             const TokenizerConfig* config) {
  auto t = std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer());
  t->source_ = std::string(source);
  LLMRT_ASSIGN_OR_RETURN(t->info_, scanSpModelProto(bytes, source));
  LLMRT_ASSIGN_OR_RETURN(t->sp_, makeProcessor(bytes, source));
  const int n = t->sp_->GetPieceSize();
  if (n <= 0 || static_cast<size_t>(n) != t->info_.num_pieces) {
    return parseError(std::string(source) + ": the SentencePiece library reads " + std::to_string(n) +
                      " pieces, the file has " + std::to_string(t->info_.num_pieces));
  }
  t->piece_count_ = n;
  t->pieces_.reserve(n);
  t->kinds_.reserve(n);
  t->byte_of_.assign(n, 0);
  for (int id = 0; id < n; ++id) {
    const std::string& piece = t->sp_->IdToPiece(id);
    t->pieces_.push_back(piece);
    Kind kind = Kind::kText;
    if (t->sp_->IsControl(id)) {
      kind = Kind::kControl;
    } else if (t->sp_->IsUnknown(id)) {
      kind = Kind::kUnknown;
    } else if (t->sp_->IsByte(id)) {
      // "<0xXX>"; the library only marks pieces of that form as bytes.
      unsigned v = 0;
      bool ok = piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>';
      for (size_t i = 3; ok && i < 5; ++i) {
        const char c = piece[i];
        const int d = (c >= '0' && c <= '9')   ? c - '0'
                      : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                      : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                               : -1;
        ok = d >= 0;
        v = v * 16 + static_cast<unsigned>(d < 0 ? 0 : d);
      }
      if (ok) {
        kind = Kind::kByte;
        t->byte_of_[id] = static_cast<uint8_t>(v);
      }
    }
    t->kinds_.push_back(kind);
  }

  t->chatglm_ = config != nullptr && config->tokenizer_class.rfind("ChatGLM", 0) == 0;
  if (config != nullptr) {
    for (const char* cls : {"ChatGLM", "InternLM", "Baichuan", "BaiChuan"})
      t->strip_after_special_ = t->strip_after_special_ || config->tokenizer_class.rfind(cls, 0) == 0;
  }
  t->legacy_ = !(config != nullptr && config->legacy.has_value() && !*config->legacy);
  if (!t->legacy_ && t->info_.add_dummy_prefix) {
    LLMRT_ASSIGN_OR_RETURN(t->sp_no_prefix_, makeProcessor(withAddDummyPrefix(bytes, false), source));
  }
  LLMRT_RETURN_IF_ERROR(t->loadAddedTokens(config));

  TokenId max_id = n - 1;
  for (const AddedToken& a : t->added_.tokens()) max_id = std::max(max_id, a.id);
  t->vocab_size_ = static_cast<size_t>(max_id) + 1;

  // BOS / EOS: the config's tokens when it names them, else the model's pieces.
  auto resolve = [&](const std::optional<std::string>& name, int model_id) -> std::optional<TokenId> {
    if (config != nullptr && name) {
      if (auto id = t->tokenToId(*name)) return id;
    }
    if (model_id >= 0 && model_id < n) return static_cast<TokenId>(model_id);
    return std::nullopt;
  };
  const std::optional<TokenId> bos = resolve(config ? config->bos_token : std::nullopt, t->sp_->bos_id());
  const std::optional<TokenId> eos = resolve(config ? config->eos_token : std::nullopt, t->sp_->eos_id());
  const bool add_bos = config && config->add_bos_token ? *config->add_bos_token : !t->chatglm_;
  const bool add_eos = config && config->add_eos_token ? *config->add_eos_token : false;
  if (t->chatglm_) {
    for (const char* s : {"[gMASK]", "sop"}) {
      if (const AddedToken* a = t->added_.byContent(s)) t->prefix_.push_back(a->id);
    }
  }
  if (add_bos) {
    if (bos)
      t->prefix_.push_back(*bos);
    else if (config && config->add_bos_token)  // only when asked for: the default is silent
      LLMRT_LOG_WARNING("%s: add_bos_token is set but the model has no BOS piece; no BOS is added",
                        t->source_.c_str());
  }
  if (add_eos) {
    if (eos)
      t->suffix_.push_back(*eos);
    else
      LLMRT_LOG_WARNING("%s: add_eos_token is set but the model has no EOS piece; no EOS is added",
                        t->source_.c_str());
  }
  return t;
}

void SentencePieceTokenizer::addToken(const AddedTokenInfo& info) {
  AddedToken a;
  a.id = info.id;
  a.content = info.content;
  a.special = info.special;
  a.lstrip = info.lstrip;
  a.rstrip = info.rstrip;
  a.single_word = info.single_word;
  a.normalized = false;  // matched on the raw text: the model normalizes inside sp.encode
  added_.add(a, a.content);
}

std::optional<TokenId> SentencePieceTokenizer::pieceId(std::string_view piece) const {
  const int id = sp_->PieceToId(piece);
  if (id < 0 || id >= piece_count_ || pieces_[id] != piece) return std::nullopt;
  return static_cast<TokenId>(id);
}

Status SentencePieceTokenizer::loadAddedTokens(const TokenizerConfig* config) {
  // 1. added_tokens_decoder: ids as the config gives them (InternLM2 maps its
  //    chat tokens onto placeholder pieces this way).
  if (config != nullptr) {
    for (const AddedTokenInfo& a : config->added_tokens) {
      if (added_.byContent(a.content) != nullptr || added_.byId(a.id) != nullptr) {
        LLMRT_LOG_WARNING("%s: added token '%s' (id %d) repeats an earlier one; ignored",
                          config->source.c_str(), boundedText(a.content).c_str(), a.id);
        continue;
      }
      addToken(a);
    }
  }
  // 2. ChatGLM's specials after the pieces.
  if (chatglm_) {
    TokenId id = piece_count_;
    for (const char* s : kChatGlmSpecials) {
      if (added_.byContent(s) == nullptr && added_.byId(id) == nullptr)
        addToken(AddedTokenInfo{id, s, true, false, false, false, false});
      ++id;
    }
  }
  // 3. The named special tokens, and the model's own BOS / EOS / UNK pieces.
  std::vector<std::string> names;
  if (config != nullptr) {
    for (const auto* n : {&config->bos_token, &config->eos_token, &config->unk_token, &config->pad_token})
      if (*n) names.push_back(**n);
    names.insert(names.end(), config->additional_special_tokens.begin(),
                 config->additional_special_tokens.end());
  }
  for (int id : {sp_->bos_id(), sp_->eos_id(), sp_->unk_id()})
    if (id >= 0 && id < piece_count_) names.push_back(pieces_[id]);
  for (const std::string& name : names) {
    if (name.empty() || added_.byContent(name) != nullptr) continue;
    if (std::optional<TokenId> id = pieceId(name)) {
      if (added_.byId(*id) == nullptr) addToken(AddedTokenInfo{*id, name, true, false, false, false, false});
    } else if (config != nullptr) {
      LLMRT_LOG_WARNING(
          "%s: special token '%s' is neither a piece of the model nor in added_tokens_decoder; "
          "it is not matched in texts",
          config->source.c_str(), boundedText(name).c_str());
    }
  }
  return Status::ok();
}

Status SentencePieceTokenizer::encodeText(std::string_view text, bool dummy_prefix,
                                          std::vector<TokenId>& ids) const {
  if (text.empty()) return Status::ok();
  const sentencepiece::SentencePieceProcessor& sp = (!dummy_prefix && sp_no_prefix_) ? *sp_no_prefix_ : *sp_;
  std::vector<int> out;
  sentencepiece::util::Status st;
  try {
    st = sp.Encode(text, &out);
  } catch (const std::bad_alloc&) {
    return resourceExhausted(source_ + ": out of memory encoding a " + std::to_string(text.size()) +
                             "-byte text");
  }
  if (!st.ok()) {
    return internalError(source_ + ": SentencePiece could not encode a " + std::to_string(text.size()) +
                         "-byte text: " + boundedText(st.ToString(), 400));
  }
  ids.insert(ids.end(), out.begin(), out.end());
  return Status::ok();
}

Result<std::vector<TokenId>> SentencePieceTokenizer::encode(std::string_view text,
                                                            bool add_special_tokens) const {
  std::string repaired;
  if (!isValidUtf8(text)) {
    repaired = utf8Lossy(text);
    text = repaired;
  }
  std::vector<TokenId> ids;
  if (add_special_tokens) ids = prefix_;
  ids.reserve(ids.size() + text.size() / 3 + 8);
  if (added_.hasRawTokens()) {
    std::vector<Segment> segs;
    added_.splitRaw(text, segs);
    for (const Segment& s : segs) {
      if (s.id >= 0)
        ids.push_back(s.id);
      else
        LLMRT_RETURN_IF_ERROR(
            encodeText(text.substr(s.start, s.end - s.start), legacy_ || s.start == 0, ids));
    }
  } else {
    LLMRT_RETURN_IF_ERROR(encodeText(text, true, ids));
  }
  if (add_special_tokens) ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  return ids;
}

std::string SentencePieceTokenizer::decode(const std::vector<TokenId>& ids, bool skip_special_tokens) const {
  std::string out, run;
  bool after_special = false;  // the last thing emitted is an added / special token's text
  auto flushBytes = [&]() {
    if (run.empty()) return;
    if (isValidUtf8(run)) {
      out += run;
    } else {
      for (size_t i = 0; i < run.size(); ++i) out += kReplacement;
    }
    run.clear();
  };
  for (TokenId id : ids) {
    if (const AddedToken* a = added_.byId(id)) {
      if (skip_special_tokens && a->special) continue;
      flushBytes();
      out += a->content;
      after_special = true;
      continue;
    }
    if (id < 0 || id >= piece_count_) continue;
    switch (kinds_[id]) {
      case Kind::kByte:
        run.push_back(static_cast<char>(byte_of_[id]));
        after_special = false;
        break;
      case Kind::kControl:
      case Kind::kUnknown:
        if (skip_special_tokens) break;
        flushBytes();
        out += pieces_[id];
        after_special = true;
        break;
      case Kind::kText: {
        flushBytes();
        std::string text = spaceToBlank(pieces_[id]);
        if (after_special && strip_after_special_ && info_.add_dummy_prefix && !text.empty() &&
            text[0] == ' ')
          text.erase(0, 1);
        out += text;
        after_special = false;
        break;
      }
    }
  }
  flushBytes();
  if (info_.add_dummy_prefix && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

std::optional<TokenId> SentencePieceTokenizer::tokenToId(std::string_view token) const {
  if (const AddedToken* a = added_.byContent(token)) return a->id;
  return pieceId(token);
}

std::optional<std::string> SentencePieceTokenizer::idToToken(TokenId id) const {
  if (const AddedToken* a = added_.byId(id)) return a->content;
  if (id >= 0 && id < piece_count_) return pieces_[id];
  return std::nullopt;
}

bool SentencePieceTokenizer::isSpecial(TokenId id) const {
  if (const AddedToken* a = added_.byId(id)) return a->special;
  return id >= 0 && id < piece_count_ && (kinds_[id] == Kind::kControl || kinds_[id] == Kind::kUnknown);
}

std::vector<AddedTokenInfo> SentencePieceTokenizer::addedTokens() const {
  std::vector<AddedTokenInfo> out;
  for (const AddedToken& a : added_.tokens())
    out.push_back(
        AddedTokenInfo{a.id, a.content, a.special, a.normalized, a.lstrip, a.rstrip, a.single_word});
  return out;
}

}  // namespace

bool sentencePieceSupported() { return true; }

Result<std::unique_ptr<Tokenizer>> loadSentencePiece(std::string_view bytes, std::string_view source,
                                                     const TokenizerConfig* config) {
  try {
    LLMRT_ASSIGN_OR_RETURN(auto t, SentencePieceTokenizer::load(bytes, source, config));
    return std::unique_ptr<Tokenizer>(std::move(t));
  } catch (const std::bad_alloc&) {
    return resourceExhausted(std::string(source) + ": out of memory loading the SentencePiece model");
  } catch (const std::exception& e) {
    return parseError(std::string(source) + ": SentencePiece failed: " + boundedText(e.what(), 400));
  }
}

}  // namespace llmrt::tok
