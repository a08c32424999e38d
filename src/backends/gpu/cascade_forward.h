// The forward side of cascade, for any GPU backend: the prefix pass, the suffix pass (sinks
// dropped: they count once, in the prefix pass) and the merge by LSE. The backend supplies its
// pass launcher; this file owns the sequence and where each pass writes. A cascade step is not
// graph-capturable (vLLM's runner never captures one); it runs eagerly.
#pragma once

#include <cstdint>

#include "backends/gpu/metadata.h"
#include "pagedattn/backend.h"

namespace pagedattn::gpu {

// Where one attention pass writes: out [T, Hq, D] with these strides (query dtype) and optionally
// lse [Hq, lse_head_stride] f32; with_sinks says whether the layer's sinks join this pass.
struct PassOutput {
  void* out = nullptr;
  int64_t token_stride = 0;
  int64_t head_stride = 0;
  float* lse = nullptr;  // nullptr = not requested
  int64_t lse_head_stride = 0;
  bool with_sinks = true;
};

enum class CascadePass { kPrefix, kSuffix };

// A plain (non-cascade) step writes straight into the caller's output and LSE.
PassOutput caller_output(const TensorView& output, const TensorView& output_lse);
// A cascade pass writes into its scratch.
PassOutput cascade_output(const CascadeMetadata& cascade, const StepInfo& step, CascadePass pass);

// merge_attn_states of the two scratches into the caller's output and LSE (CUDA builds).
Status merge_cascade(const CascadeMetadata& cascade, const StepInfo& step, const Device& device,
                     const TensorView& output, const TensorView& output_lse, StreamHandle stream);

// launch_pass(CascadePass, const PassOutput&) -> Status runs the backend's kernel for one pass.
template <typename LaunchPass>
Status run_cascade(const CascadeMetadata& cascade, const StepInfo& step, const Device& device,
                   const TensorView& output, const TensorView& output_lse, LaunchPass&& launch_pass,
                   StreamHandle stream) {
  for (CascadePass pass : {CascadePass::kPrefix, CascadePass::kSuffix}) {
    PAGEDATTN_RETURN_IF_ERROR(launch_pass(pass, cascade_output(cascade, step, pass)));
  }
  return merge_cascade(cascade, step, device, output, output_lse, stream);
}

}  // namespace pagedattn::gpu
