// Status codes and their names.
#include "pagedattn/status.h"

namespace pagedattn {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kOutOfRange: return "OutOfRange";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kCudaError: return "CudaError";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status invalid_argument(std::string message) {
  return Status(StatusCode::kInvalidArgument, std::move(message));
}
Status unimplemented(std::string message) {
  return Status(StatusCode::kUnimplemented, std::move(message));
}
Status not_found(std::string message) {
  return Status(StatusCode::kNotFound, std::move(message));
}
Status out_of_range(std::string message) {
  return Status(StatusCode::kOutOfRange, std::move(message));
}
Status internal_error(std::string message) {
  return Status(StatusCode::kInternal, std::move(message));
}

}  // namespace pagedattn
