// The device combine's kernels (combine_kernels.cu), one per step of each path; the collectives
// between them go through the Communicator. Host header: plain pointers, views, no CUDA types.
// Every kernel reads strided views and writes the packed layouts docs/dcp.md draws; `shape` is
// check_combine's and `stream` a cudaStream_t.
#pragma once

#include "dcp/combine_checks.h"

namespace pagedattn::dcp {

// This rank's LSEs [H, T] (any strides) into packed_lse [H * T]; with packed_out, also its
// outputs [T, H, D] (any strides) into packed_out [N, T, H / N, D], chunk s being rank s's head
// slice (a2a's send layout).
Status launch_pack_partials(const CombineShape& shape, const TensorView& partial_out,
                            const TensorView& partial_lse, void* packed_out, float* packed_lse,
                            void* stream);

// ag_rs: from every rank's LSEs all_lse [N, H, T], this rank's outputs scaled by its weight and
// rounded to their dtype into scaled [N, T, H / N, D] (exact zeros where the rank is empty), and
// the combined LSE of its own head slice into out_lse [H / N, T] (any strides).
Status launch_ag_rs_scale(const CombineShape& shape, int world_size, int rank,
                          const TensorView& partial_out, const float* all_lse, void* scaled,
                          const TensorView& out_lse, void* stream);

// a2a: every rank's outputs of this rank's head slice recv_out [N, T, H / N, D] and LSEs
// recv_lse [N, H / N, T] merged in float32 in rank order, rounded once, into out [T, H / N, D]
// (contiguous) and out_lse [H / N, T] (any strides).
Status launch_a2a_reduce(const CombineShape& shape, int world_size, const void* recv_out,
                         const float* recv_lse, const TensorView& out, const TensorView& out_lse,
                         void* stream);

}  // namespace pagedattn::dcp
