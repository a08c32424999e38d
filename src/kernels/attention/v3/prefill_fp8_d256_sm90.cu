// The v3 FP8 prefill kernel for head size 256 (sm_90a). Not named _hd256_: the build keeps every
// size's file, and launch_prefill_fp8_kernel compiles to an Unimplemented status when 256 is not
// built.
#include "kernels/attention/v3/prefill_fp8_instance.cuh"

namespace pagedattn::kernels::attention::v3 {
template Status launch_prefill_fp8_kernel<256>(const CUtensorMap&, const CUtensorMap&,
                                               const PrefillFp8Args&, Fp8Tiles, int,
                                               cudaStream_t);
}  // namespace pagedattn::kernels::attention::v3
