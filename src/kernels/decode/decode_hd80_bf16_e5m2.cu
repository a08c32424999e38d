// One decode instantiation per (head size, query dtype, cache kind), so that CMake's *_hd<N>_*
// filter builds only the configured head sizes and the files compile in parallel.
#include "kernels/decode/decode_kernel.cuh"

namespace pagedattn::kernels::decode {

template cudaError_t launch_decode_instance<80, __nv_bfloat16, CacheKind::kFp8E5M2>(
    const DecodeArgs&, cudaStream_t);
template int decode_instance_ctas_per_sm<80, __nv_bfloat16, CacheKind::kFp8E5M2>();

}  // namespace pagedattn::kernels::decode
