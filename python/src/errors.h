// Status values become Python exceptions: bad input is a ValueError (the message names the
// argument), a request this build cannot serve is NotImplementedError, the rest RuntimeError.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>

#include "pagedattn/status.h"

namespace pagedattn::python {

[[noreturn]] void raise_status(const Status& status);
[[noreturn]] void raise_value_error(const std::string& message);

inline void check(const Status& status) {
  if (!status.ok()) raise_status(status);
}

template <typename T>
T unwrap(StatusOr<T>&& result) {
  if (!result.ok()) raise_status(result.status());
  return std::move(result).value();
}

}  // namespace pagedattn::python
