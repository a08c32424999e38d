// The cascade merge: the two scratches (viewed as [T, Hq, D] and [Hq, T] over the real tokens)
// merged by LSE into the caller's output and LSE.
#include "backends/gpu/cascade_forward.h"
#include "kernels/merge_states.h"

namespace pagedattn::gpu {

Status merge_cascade(const CascadeMetadata& c, const StepInfo& step, const Device& device,
                     const TensorView& output, const TensorView& output_lse, StreamHandle stream) {
  const int64_t t = c.num_tokens, h = step.layer.num_heads, d = step.layer.head_size;
  const int64_t rows_shape[] = {t, h, d}, rows_strides[] = {h * d, d, 1};
  const int64_t lse_shape[] = {h, t}, lse_strides[] = {c.lse_stride, 1};
  const TensorView prefix_rows(c.prefix_out, c.dtype, device, rows_shape, rows_strides);
  const TensorView suffix_rows(c.suffix_out, c.dtype, device, rows_shape, rows_strides);
  const TensorView prefix_lse(c.prefix_lse, DType::kF32, device, lse_shape, lse_strides);
  const TensorView suffix_lse(c.suffix_lse, DType::kF32, device, lse_shape, lse_strides);
  const int64_t out_strides[] = {output.stride(0), output.stride(1), 1};
  const TensorView out(output.data(), output.dtype(), device, rows_shape, out_strides);
  TensorView out_lse;
  if (output_lse.defined()) {
    const int64_t out_lse_strides[] = {output_lse.stride(0), output_lse.stride(1)};
    out_lse = TensorView(output_lse.data(), DType::kF32, device, lse_shape, out_lse_strides);
  }
  return kernels::launch_merge_attn_states(out, prefix_rows, prefix_lse, suffix_rows, suffix_lse,
                                           out_lse, t, stream);
}

}  // namespace pagedattn::gpu
