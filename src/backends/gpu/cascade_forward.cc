#include "backends/gpu/cascade_forward.h"

namespace pagedattn::gpu {

PassOutput caller_output(const TensorView& output, const TensorView& output_lse) {
  PassOutput o;
  o.out = output.data();
  o.token_stride = output.stride(0);
  o.head_stride = output.stride(1);
  if (output_lse.defined()) {
    o.lse = output_lse.data_as<float>();
    o.lse_head_stride = output_lse.stride(0);
  }
  return o;
}

PassOutput cascade_output(const CascadeMetadata& cascade, const StepInfo& step, CascadePass pass) {
  const bool prefix = pass == CascadePass::kPrefix;
  PassOutput o;
  o.out = prefix ? cascade.prefix_out : cascade.suffix_out;
  o.token_stride = int64_t{step.layer.num_heads} * step.layer.head_size;
  o.head_stride = step.layer.head_size;
  o.lse = prefix ? cascade.prefix_lse : cascade.suffix_lse;
  o.lse_head_stride = cascade.lse_stride;
  o.with_sinks = prefix;
  return o;
}

}  // namespace pagedattn::gpu
