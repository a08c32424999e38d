// The argument checks both DCP combine paths share, on host and on device buffers.
#pragma once

#include <cstdint>

#include "pagedattn/dcp_combine.h"

namespace pagedattn::dcp {

struct CombineShape {
  int64_t num_tokens = 0;      // T
  int64_t num_heads = 0;       // H, all query heads
  int64_t head_size = 0;       // D
  int64_t heads_per_rank = 0;  // H / N
};

// Checks the buffers of dcp_combine (dcp_combine.h) for `comm`'s group; `path` names the caller.
// Every buffer lives where the communicator's do: the host (stream null: the host combine
// finishes before it returns) or one CUDA device (the combine is enqueued on `stream`; CUDA
// builds only).
StatusOr<CombineShape> check_combine(std::string_view path, const Communicator& comm,
                                     const TensorView& partial_out, const TensorView& partial_lse,
                                     const TensorView& out, const TensorView& out_lse,
                                     StreamHandle stream);

}  // namespace pagedattn::dcp
