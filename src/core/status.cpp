#include "llmrt/status.h"

namespace llmrt {

std::string_view statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kParseError: return "ParseError";
    case StatusCode::kOutOfRange: return "OutOfRange";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kCancelled: return "Cancelled";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::toString() const {
  if (isOk()) return "OK";
  std::string s(statusCodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::withContext(std::string_view context) const {
  if (isOk()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

Status fieldError(std::string_view where, std::string_view field, std::string_view value,
                  std::string_view expected) {
  std::string m;
  m.reserve(where.size() + field.size() + value.size() + expected.size() + 40);
  m += where;
  m += ": field '";
  m += field;
  m += "' has value ";
  m += value;
  m += "; expected ";
  m += expected;
  return invalidArgument(std::move(m));
}

}  // namespace llmrt
