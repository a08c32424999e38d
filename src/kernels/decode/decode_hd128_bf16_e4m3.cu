// One decode instantiation per (head size, query dtype, cache kind), so that CMake's *_hd<N>_*
// filter builds only the configured head sizes and the files compile in parallel.
#include "kernels/decode/decode_kernel.cuh"

namespace pagedattn::kernels::decode {

template cudaError_t launch_decode_instance<128, __nv_bfloat16, CacheKind::kFp8E4M3>(
    const DecodeArgs&, cudaStream_t);
template int decode_instance_ctas_per_sm<128, __nv_bfloat16, CacheKind::kFp8E4M3>();

}  // namespace pagedattn::kernels::decode
