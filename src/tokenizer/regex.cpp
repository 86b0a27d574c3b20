#include "tokenizer/regex.h"

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include "tokenizer/json_util.h"
#include "tokenizer/unicode.h"

namespace llmrt::tok {
namespace {

constexpr const char* kSpaceSet = "\\t-\\r\\x{85}\\p{Z}";
constexpr const char* kWordSet = "\\p{L}\\p{M}\\p{N}\\p{Pc}";

// Per-thread matching state shared by every Regex: match data with room for
// the whole-match offsets, and a JIT stack larger than the 32 KiB default so
// long whitespace runs never overflow it.
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);  // PCRE2's default match / depth / heap limits
    stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    if (stack != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadMatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    if (stack != nullptr) pcre2_jit_stack_free(stack);
  }
};

ThreadMatchState& threadState() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

std::string onigToPcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  size_t class_start = 0;  // index in `p` just after '[' or '[^'
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[i + 1];
      if (e == 'Q') {  // \Q...\E is literal text
        size_t end = p.find("\\E", i + 2);
        size_t stop = end == std::string_view::npos ? p.size() : end + 2;
        out.append(p.substr(i, stop - i));
        i = stop - 1;
        continue;
      }
      ++i;
      if (!in_class) {
        switch (e) {
          case 's':
            out += std::string("[") + kSpaceSet + "]";
            continue;
          case 'S':
            out += std::string("[^") + kSpaceSet + "]";
            continue;
          case 'w':
            out += std::string("[") + kWordSet + "]";
            continue;
          case 'W':
            out += std::string("[^") + kWordSet + "]";
            continue;
          case 'd':
            out += "\\p{Nd}";
            continue;
          case 'D':
            out += "\\P{Nd}";
            continue;
          case 'h':
            out += "[0-9a-fA-F]";
            continue;
          case 'H':
            out += "[^0-9a-fA-F]";
            continue;
          default:
            break;
        }
      } else {
        switch (e) {
          case 's':
            out += kSpaceSet;
            continue;
          case 'w':
            out += kWordSet;
            continue;
          case 'd':
            out += "\\p{Nd}";
            continue;
          case 'D':
            out += "\\P{Nd}";
            continue;
          case 'h':
            out += "0-9a-fA-F";
            continue;
          default:
            break;
        }
      }
      out.push_back('\\');
      out.push_back(e);
      continue;
    }
    if (!in_class) {
      if (c == '[') {
        in_class = true;
        out.push_back(c);
        if (i + 1 < p.size() && p[i + 1] == '^') {
          out.push_back('^');
          ++i;
        }
        class_start = i + 1;
        continue;
      }
    } else {
      if (c == ']' && i != class_start) {
        in_class = false;
      } else if (c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX class [:alpha:]
        size_t end = p.find(":]", i + 2);
        if (end != std::string_view::npos) {
          out.append(p.substr(i, end + 2 - i));
          i = end + 1;
          continue;
        }
      }
    }
    out.push_back(c);
  }
  return out;
}

std::string Regex::escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}/-#").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

Result<Regex> Regex::compile(std::string_view pattern, std::string_view where) {
  std::string translated = onigToPcre2(pattern);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    return parseError(std::string(where) + ": invalid regex '" + boundedText(pattern, 120) +
                      "': " + reinterpret_cast<const char*>(buf) + " at offset " + std::to_string(err_off));
  }
  Regex re;
  re.pattern_ = std::string(pattern);
  re.where_ = std::string(where);
  re.jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  re.code_ = std::shared_ptr<void>(code, [](void* c) { pcre2_code_free(static_cast<pcre2_code*>(c)); });
  return re;
}

size_t Regex::nextCharLen(std::string_view text, size_t i) {
  return utf8SeqLen(static_cast<uint8_t>(text[i]));
}

Status Regex::matchError(int rc, size_t text_size) const {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(rc, buf, sizeof(buf)) < 0) buf[0] = 0;
  const bool limit = rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
                     rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_NOMEMORY ||
                     rc == PCRE2_ERROR_JIT_STACKLIMIT;
  return Status(limit ? StatusCode::kResourceExhausted : StatusCode::kInternal,
                where_ + ": regex matching failed on a " + std::to_string(text_size) + "-byte text: " +
                    reinterpret_cast<const char*>(buf) + " (PCRE2 error " + std::to_string(rc) + ")");
}

Result<bool> Regex::find(std::string_view text, size_t start, size_t& mstart, size_t& mend) const {
  ThreadMatchState& st = threadState();
  auto* code = static_cast<pcre2_code*>(code_.get());
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc;
  if (jit_) {
    rc = pcre2_jit_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, st.data, st.context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
      rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, st.data,
                       st.context);
  } else {
    rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, st.data, st.context);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  // rc == 0 would mean the ovector is too small for the groups; the whole
  // match (pair 0) is still set, which is all that is read here.
  if (rc < 0) return matchError(rc, text.size());
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
  mstart = ov[0];
  mend = ov[1];
  return true;
}

}  // namespace llmrt::tok
