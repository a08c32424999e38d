// dcp_combine: the dcp_comm_backend names and the choice between the two paths.
#include <string>

#include "pagedattn/dcp_combine.h"

namespace pagedattn {

std::string_view dcp_comm_backend_name(DcpCommBackend backend) {
  return backend == DcpCommBackend::kAgRs ? "ag_rs" : "a2a";
}

StatusOr<DcpCommBackend> parse_dcp_comm_backend(std::string_view name) {
  if (name == "ag_rs") return DcpCommBackend::kAgRs;
  if (name == "a2a") return DcpCommBackend::kA2a;
  return invalid_argument("dcp_comm_backend = '" + std::string(name) +
                          "' is not one of: ag_rs, a2a");
}

Status dcp_combine(Communicator& comm, DcpCommBackend backend, const TensorView& partial_out,
                   const TensorView& partial_lse, const TensorView& out, const TensorView& out_lse,
                   StreamHandle stream) {
  if (backend == DcpCommBackend::kAgRs) {
    return dcp_combine_ag_rs(comm, partial_out, partial_lse, out, out_lse, stream);
  }
  return dcp_combine_a2a(comm, partial_out, partial_lse, out, out_lse, stream);
}

}  // namespace pagedattn
