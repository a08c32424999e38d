// dcp_combine: the dcp_comm_backend names and the one choice among the paths: ag_rs or a2a, on
// the host or on the device the communicator's buffers live on.
#include <string>

#include "dcp/combine_paths.h"
#include "pagedattn/config.h"
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
  const bool ag_rs = backend == DcpCommBackend::kAgRs;
  PAGEDATTN_ASSIGN_OR_RETURN(
      const dcp::CombineShape shape,
      dcp::check_combine(ag_rs ? "dcp_combine_ag_rs" : "dcp_combine_a2a", comm, partial_out,
                         partial_lse, out, out_lse, stream));
  if (comm.device().is_cpu()) {
    return ag_rs ? dcp::combine_ag_rs_on_host(comm, shape, partial_out, partial_lse, out, out_lse)
                 : dcp::combine_a2a_on_host(comm, shape, partial_out, partial_lse, out, out_lse);
  }
#if PAGEDATTN_WITH_CUDA
  return ag_rs ? dcp::combine_ag_rs_on_device(comm, shape, partial_out, partial_lse, out, out_lse,
                                              stream)
               : dcp::combine_a2a_on_device(comm, shape, partial_out, partial_lse, out, out_lse,
                                            stream);
#else
  return internal_error(
      "dcp_combine: check_combine let device buffers through a build without CUDA");
#endif
}

Status dcp_combine_ag_rs(Communicator& comm, const TensorView& partial_out,
                         const TensorView& partial_lse, const TensorView& out,
                         const TensorView& out_lse, StreamHandle stream) {
  return dcp_combine(comm, DcpCommBackend::kAgRs, partial_out, partial_lse, out, out_lse, stream);
}

Status dcp_combine_a2a(Communicator& comm, const TensorView& partial_out,
                       const TensorView& partial_lse, const TensorView& out,
                       const TensorView& out_lse, StreamHandle stream) {
  return dcp_combine(comm, DcpCommBackend::kA2a, partial_out, partial_lse, out, out_lse, stream);
}

}  // namespace pagedattn
