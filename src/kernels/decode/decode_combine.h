// Internal: the decode family's split combine (decode_combine.cu).
#pragma once

#include <cuda_runtime.h>

#include "kernels/decode/decode_attention.h"
#include "kernels/decode/decode_work.h"

namespace pagedattn::kernels::decode {

// overlap_launch: launched as a programmatic dependent of the decode kernel (sm_90), so that its
// launch and CTA setup overlap the decode kernel's last CTAs; it waits for the whole decode grid
// before reading any partial.
template <typename T>
cudaError_t launch_decode_combine(const DecodeAttentionParams& p, int group, cudaStream_t stream,
                                  bool overlap_launch = false);

}  // namespace pagedattn::kernels::decode
