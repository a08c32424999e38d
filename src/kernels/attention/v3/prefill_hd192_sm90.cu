// The v3 prefill kernel for head size 192 (sm_90a; empty when the build does not keep 192).
#include "kernels/attention/v3/prefill_instance.cuh"

namespace pagedattn::kernels::attention::v3 {
template Status launch_prefill_kernel<192>(const CUtensorMap&, const CUtensorMap&,
                                           const PrefillArgs&, int, cudaStream_t);
}  // namespace pagedattn::kernels::attention::v3
