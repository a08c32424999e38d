#include "errors.h"

namespace pagedattn::python {

void raise_status(const Status& status) {
  const std::string message = status.to_string();
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kOutOfRange:
      throw pybind11::value_error(message);
    case StatusCode::kUnimplemented:
      PyErr_SetString(PyExc_NotImplementedError, message.c_str());
      throw pybind11::error_already_set();
    default:
      throw std::runtime_error(message);
  }
}

void raise_value_error(const std::string& message) { throw pybind11::value_error(message); }

}  // namespace pagedattn::python
