// The device in-process group's kernels (in_process_kernels.cu): one launch per collective, reading
// every rank's send buffer. Host header.
#pragma once

#include <cstdint>
#include <span>

#include "dcp/in_process_group.h"

namespace pagedattn::dcp {

// recv[i] = the sum over ranks s, in rank order, of sends[s][first + i], in float32 and rounded
// once to `dtype` (f32, f16 or bf16): the host group's arithmetic, so both give the same bits.
// At most kMaxDeviceGroupRanks buffers; stream: a cudaStream_t.
Status launch_rank_sum(std::span<const void* const> sends, int64_t first, void* recv, int64_t count,
                       DType dtype, void* stream);

// recv's bytes [s * bytes, (s + 1) * bytes) = sends[s]'s bytes [first, first + bytes), for every
// rank s: all_gather (first 0) and all_to_all (first = this rank's chunk) in one launch instead of
// a copy per rank. At most kMaxDeviceGroupRanks buffers; stream: a cudaStream_t.
Status launch_rank_gather(std::span<const void* const> sends, int64_t first, void* recv,
                          int64_t bytes, void* stream);

}  // namespace pagedattn::dcp
