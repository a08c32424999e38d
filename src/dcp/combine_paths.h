// The two combine paths on each side, called after check_combine (dcp/combine_checks.h) has
// accepted the buffers: dcp_combine (combine.cc) is the one place that picks among them, by the
// communicator's device and the dcp_comm_backend.
#pragma once

#include "dcp/combine_checks.h"

namespace pagedattn::dcp {

// Host buffers over a host communicator; finished on return.
Status combine_ag_rs_on_host(Communicator& comm, const CombineShape& shape,
                             const TensorView& partial_out, const TensorView& partial_lse,
                             const TensorView& out, const TensorView& out_lse);
Status combine_a2a_on_host(Communicator& comm, const CombineShape& shape,
                           const TensorView& partial_out, const TensorView& partial_lse,
                           const TensorView& out, const TensorView& out_lse);

// Device buffers over a communicator on their device, enqueued on `stream` (CUDA builds only).
Status combine_ag_rs_on_device(Communicator& comm, const CombineShape& shape,
                               const TensorView& partial_out, const TensorView& partial_lse,
                               const TensorView& out, const TensorView& out_lse,
                               StreamHandle stream);
Status combine_a2a_on_device(Communicator& comm, const CombineShape& shape,
                             const TensorView& partial_out, const TensorView& partial_lse,
                             const TensorView& out, const TensorView& out_lse, StreamHandle stream);

}  // namespace pagedattn::dcp
