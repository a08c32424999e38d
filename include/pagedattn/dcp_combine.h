// Combining DCP ranks' partial attention (docs/dcp.md). Every rank attends ALL query heads over the
// keys it stores and holds partial_out [T, H, D] with its natural-log partial_lse [H, T]; a combine
// gives rank r the exact attention of its head slice [r * H / N, (r + 1) * H / N) over all keys:
// out [T, H / N, D] and out_lse [H / N, T].
//   ag_rs  all-gather the LSEs, scale each rank's output by exp(lse_rank - lse_global),
//          reduce-scatter (sum) over heads (vLLM's cp_lse_ag_out_rs).
//   a2a    one all-to-all of the outputs and one of the LSEs by head slice, then a local
//          LSE-weighted sum (vLLM's dcp_a2a_lse_reduce).
// Both are the merge of attention.md over the N ranks: an LSE of -inf or +inf means "no keys on
// that rank" and the rank adds nothing (not even a NaN in its output); when every rank is empty the
// result is rank 0's output with lse -inf, as merge_attn_states gives for two empty sides. A NaN
// LSE makes its row's output and LSE NaN; a NaN in a contributing output stays NaN.
#pragma once

#include <string_view>

#include "pagedattn/backend.h"
#include "pagedattn/communicator.h"
#include "pagedattn/status.h"
#include "pagedattn/tensor.h"

namespace pagedattn {

// DcpCommBackend (vLLM's dcp_comm_backend) is declared in backend.h.
std::string_view dcp_comm_backend_name(DcpCommBackend backend);  // "ag_rs", "a2a"
StatusOr<DcpCommBackend> parse_dcp_comm_backend(std::string_view name);

// partial_out: [T, H, D] f32, f16 or bf16, any strides; partial_lse: [H, T] f32, any strides;
// out: [T, H / N, D] partial_out's dtype, contiguous; out_lse: [H / N, T] f32, any strides.
// H must be a multiple of N. Every rank calls it with the same shapes, dtypes and devices, which is
// all the checks read, so a refusal happens on every rank before any collective (a rank that alone
// returned early would leave the others waiting in the first one). Host buffers go over a host
// Communicator (stream null); CUDA buffers over a Communicator on their device, enqueued on
// `stream` (CUDA builds).
Status dcp_combine(Communicator& comm, DcpCommBackend backend, const TensorView& partial_out,
                   const TensorView& partial_lse, const TensorView& out, const TensorView& out_lse,
                   StreamHandle stream = nullptr);

// The two paths by name (dcp_combine picks one).
Status dcp_combine_ag_rs(Communicator& comm, const TensorView& partial_out,
                         const TensorView& partial_lse, const TensorView& out,
                         const TensorView& out_lse, StreamHandle stream = nullptr);
Status dcp_combine_a2a(Communicator& comm, const TensorView& partial_out,
                       const TensorView& partial_lse, const TensorView& out,
                       const TensorView& out_lse, StreamHandle stream = nullptr);

}  // namespace pagedattn
