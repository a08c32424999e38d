// merge_attn_states: validation, the CPU implementation, and dispatch to the CUDA kernel.
#include <cstdint>
#include <optional>
#include <string>

#include "common/lse_merge.h"
#include "common/numeric.h"
#include "pagedattn/config.h"
#include "pagedattn/ops.h"

#if PAGEDATTN_WITH_CUDA
#include "kernels/merge_states.h"
#endif

namespace pagedattn {
namespace {

Status check_output_like(const TensorView& t, std::string_view what, const TensorView& output) {
  if (!t.defined()) return invalid_argument(std::string(what) + " is required");
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(t, what, 3));
  PAGEDATTN_RETURN_IF_ERROR(
      expect_shape(t, what, {output.size(0), output.size(1), output.size(2)}));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(t, what, {output.dtype()}));
  return expect_device(t, what, output.device());
}

Status check_lse(const TensorView& t, std::string_view what, const TensorView& output) {
  if (!t.defined()) return invalid_argument(std::string(what) + " is required");
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(t, what, 2));
  PAGEDATTN_RETURN_IF_ERROR(expect_shape(t, what, {output.size(1), output.size(0)}));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(t, what, {DType::kF32}));
  return expect_device(t, what, output.device());
}

float lse_at(const TensorView& lse, int64_t h, int64_t t) {
  return lse.data_as<const float>()[h * lse.stride(0) + t * lse.stride(1)];
}

int64_t offset3(const TensorView& x, int64_t t, int64_t h, int64_t d) {
  return t * x.stride(0) + h * x.stride(1) + d * x.stride(2);
}

void merge_on_cpu(const TensorView& output, const TensorView& prefix_output,
                  const TensorView& prefix_lse, const TensorView& suffix_output,
                  const TensorView& suffix_lse, const TensorView& output_lse,
                  int64_t prefix_num_tokens) {
  const int64_t num_tokens = output.size(0);
  const int64_t num_heads = output.size(1);
  const int64_t head_size = output.size(2);
  const DType dtype = output.dtype();
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t h = 0; h < num_heads; ++h) {
      // No context: the suffix is the whole answer.
      const LseMerge w = t >= prefix_num_tokens
                             ? LseMerge{lse_at(suffix_lse, h, t), 0.0f, 1.0f}
                             : merge_lse(lse_at(prefix_lse, h, t), lse_at(suffix_lse, h, t));
      for (int64_t d = 0; d < head_size; ++d) {
        // A zero weight must not turn a non-finite value on the other side into NaN.
        float value = 0.0f;
        if (w.prefix_weight != 0.0f) {
          value += w.prefix_weight *
                   load_as_float(prefix_output.data(), dtype, offset3(prefix_output, t, h, d));
        }
        if (w.suffix_weight != 0.0f) {
          value += w.suffix_weight *
                   load_as_float(suffix_output.data(), dtype, offset3(suffix_output, t, h, d));
        }
        store_from_float(output.data(), dtype, offset3(output, t, h, d), value);
      }
      if (output_lse.defined()) {
        output_lse.data_as<float>()[h * output_lse.stride(0) + t * output_lse.stride(1)] = w.lse;
      }
    }
  }
}

#if PAGEDATTN_WITH_CUDA
// The CUDA kernel reads 16-byte packs along the head and shares one stride set for both inputs.
Status check_cuda_layout(const TensorView& output, const TensorView& prefix_output,
                         const TensorView& suffix_output, const TensorView& prefix_lse,
                         const TensorView& suffix_lse, const TensorView& output_lse) {
  for (const auto& [t, what] :
       {std::pair{&output, "output"}, std::pair{&prefix_output, "prefix_output"},
        std::pair{&suffix_output, "suffix_output"}}) {
    if (t->stride(2) != 1 || t->stride(0) != t->size(1) * t->stride(1)) {
      return invalid_argument(std::string(what) +
                              " must have a contiguous head dim and token stride " +
                              "num_heads * head stride on CUDA; got " + t->describe());
    }
  }
  if (prefix_output.stride(1) != suffix_output.stride(1)) {
    return invalid_argument("prefix_output and suffix_output must share strides on CUDA");
  }
  for (const auto& [t, what] :
       {std::pair{&prefix_lse, "prefix_lse"}, std::pair{&suffix_lse, "suffix_lse"},
        std::pair{&output_lse, "output_lse"}}) {
    if (t->defined() && !t->is_contiguous()) {
      return invalid_argument(std::string(what) + " must be contiguous on CUDA; got " +
                              t->describe());
    }
  }
  return ok_status();
}
#endif

}  // namespace

Status merge_attn_states(const TensorView& output, const TensorView& prefix_output,
                         const TensorView& prefix_lse, const TensorView& suffix_output,
                         const TensorView& suffix_lse, const TensorView& output_lse,
                         std::optional<int64_t> prefill_tokens_with_context, StreamHandle stream) {
  if (!output.defined()) return invalid_argument("output is required");
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(output, "output", 3));
  PAGEDATTN_RETURN_IF_ERROR(
      expect_dtype(output, "output", {DType::kF32, DType::kF16, DType::kBF16}));
  PAGEDATTN_RETURN_IF_ERROR(check_output_like(prefix_output, "prefix_output", output));
  PAGEDATTN_RETURN_IF_ERROR(check_output_like(suffix_output, "suffix_output", output));
  PAGEDATTN_RETURN_IF_ERROR(check_lse(prefix_lse, "prefix_lse", output));
  PAGEDATTN_RETURN_IF_ERROR(check_lse(suffix_lse, "suffix_lse", output));
  if (output_lse.defined()) PAGEDATTN_RETURN_IF_ERROR(check_lse(output_lse, "output_lse", output));

  const int64_t num_tokens = output.size(0);
  const int64_t prefix_num_tokens = prefill_tokens_with_context.value_or(num_tokens);
  if (prefix_num_tokens < 0 || prefix_num_tokens > num_tokens) {
    return invalid_argument("prefill_tokens_with_context = " + std::to_string(prefix_num_tokens) +
                            " must be in [0, num_tokens = " + std::to_string(num_tokens) + "]");
  }

  if (output.device().is_cpu()) {
    merge_on_cpu(output, prefix_output, prefix_lse, suffix_output, suffix_lse, output_lse,
                 prefix_num_tokens);
    return ok_status();
  }
#if PAGEDATTN_WITH_CUDA
  PAGEDATTN_RETURN_IF_ERROR(
      check_cuda_layout(output, prefix_output, suffix_output, prefix_lse, suffix_lse, output_lse));
  return kernels::launch_merge_attn_states(output, prefix_output, prefix_lse, suffix_output,
                                           suffix_lse, output_lse, prefix_num_tokens, stream);
#else
  return unimplemented("merge_attn_states on " + device_name(output.device()) +
                       ": this build has no CUDA support");
#endif
}

}  // namespace pagedattn
