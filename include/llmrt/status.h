// Status and Result<T>: the error type at every public boundary of llmrt.
// No exceptions cross the library boundary; functions that can fail on bad
// input return Status or Result<T>, whose message names what was wrong
// (file, field, value, what was expected).
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace llmrt {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // a value given by the caller is out of its allowed range
  kNotFound,           // a file, tensor or key is missing
  kIoError,            // reading or mapping a file failed
  kParseError,         // malformed file contents (JSON, safetensors header, ...)
  kOutOfRange,         // offsets or indices beyond their container
  kResourceExhausted,  // out of KV cache blocks, memory, ...
  kUnimplemented,      // a feature this build does not support
  kFailedPrecondition, // called in the wrong state
  kCancelled,
  kInternal,
};

std::string_view statusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }

  bool isOk() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return isOk(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "InvalidArgument: <message>"
  std::string toString() const;

  // Returns a copy whose message is "<context>: <message>" (no-op for OK).
  Status withContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalidArgument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
inline Status notFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
inline Status ioError(std::string msg) { return {StatusCode::kIoError, std::move(msg)}; }
inline Status parseError(std::string msg) { return {StatusCode::kParseError, std::move(msg)}; }
inline Status outOfRange(std::string msg) { return {StatusCode::kOutOfRange, std::move(msg)}; }
inline Status resourceExhausted(std::string msg) { return {StatusCode::kResourceExhausted, std::move(msg)}; }
inline Status unimplemented(std::string msg) { return {StatusCode::kUnimplemented, std::move(msg)}; }
inline Status failedPrecondition(std::string msg) { return {StatusCode::kFailedPrecondition, std::move(msg)}; }
inline Status internalError(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }

// The standard message for a bad field value:
//   "<where>: field '<field>' has value <value>; expected <expected>"
Status fieldError(std::string_view where, std::string_view field, std::string_view value,
                  std::string_view expected);

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).isOk() && "Result built from an OK status");
  }

  bool isOk() const { return v_.index() == 0; }
  explicit operator bool() const { return isOk(); }

  const Status& status() const {
    static const Status kOkStatus;
    return isOk() ? kOkStatus : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace llmrt

#define LLMRT_CONCAT_INNER_(a, b) a##b
#define LLMRT_CONCAT_(a, b) LLMRT_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define LLMRT_RETURN_IF_ERROR(expr)              \
  do {                                           \
    ::llmrt::Status llmrt_status_ = (expr);      \
    if (!llmrt_status_.isOk()) return llmrt_status_; \
  } while (0)

// `LLMRT_ASSIGN_OR_RETURN(auto x, makeX());` declares x from a Result or returns its Status.
#define LLMRT_ASSIGN_OR_RETURN(lhs, expr) \
  LLMRT_ASSIGN_OR_RETURN_IMPL_(LLMRT_CONCAT_(llmrt_result_, __LINE__), lhs, expr)
#define LLMRT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.isOk()) return tmp.status();              \
  lhs = std::move(tmp).value()
