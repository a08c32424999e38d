// Status and StatusOr: the only way errors cross the public API (no exceptions, no exit).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace pagedattn {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // malformed input: a parameter outside what is allowed
  kUnimplemented,    // a valid request this build or backend cannot serve
  kNotFound,         // an unknown name (backend, dtype, ...)
  kOutOfRange,       // an index or size past a buffer
  kInternal,         // a broken invariant inside the library
  kCudaError,        // a CUDA runtime or launch error
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string to_string() const;  // "InvalidArgument: <message>"

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status ok_status() { return Status(); }
Status invalid_argument(std::string message);
Status unimplemented(std::string message);
Status not_found(std::string message);
Status out_of_range(std::string message);
Status internal_error(std::string message);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}            // NOLINT: implicit by design
  StatusOr(Status status)  // NOLINT: implicit by design
      : status_(status.ok() ? internal_error("StatusOr constructed from an OK status")
                            : std::move(status)) {}
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace pagedattn

#define PAGEDATTN_CONCAT_INNER(a, b) a##b
#define PAGEDATTN_CONCAT(a, b) PAGEDATTN_CONCAT_INNER(a, b)

#define PAGEDATTN_RETURN_IF_ERROR(expr)                  \
  do {                                                   \
    ::pagedattn::Status pagedattn_status_ = (expr);      \
    if (!pagedattn_status_.ok()) return pagedattn_status_; \
  } while (0)

#define PAGEDATTN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()

#define PAGEDATTN_ASSIGN_OR_RETURN(lhs, expr) \
  PAGEDATTN_ASSIGN_OR_RETURN_IMPL(PAGEDATTN_CONCAT(pagedattn_statusor_, __LINE__), lhs, expr)
