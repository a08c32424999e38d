// gtest printers for the DCP tests' parameters, so that test names and GetParam() read as words
// ("ag_rs", "bf16"), not raw bytes. Include in every test file that takes these as parameters.
#pragma once

#include <ostream>

#include "pagedattn/dcp_combine.h"
#include "pagedattn/types.h"

namespace pagedattn {

inline void PrintTo(DcpCommBackend backend, std::ostream* os) {
  *os << dcp_comm_backend_name(backend);
}
inline void PrintTo(DType dtype, std::ostream* os) {
  *os << dtype_name(dtype);
}

}  // namespace pagedattn
