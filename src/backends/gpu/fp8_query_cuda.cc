#include "backends/gpu/fp8_query.h"

#include <cuda_runtime.h>

#include <string>

#include "pagedattn/ops.h"
#include "runtime/check.h"

namespace pagedattn::gpu {

ForwardQuery::~ForwardQuery() {
  if (buffer_ != nullptr) cudaFreeAsync(buffer_, static_cast<cudaStream_t>(stream_));
}

StatusOr<TensorView> ForwardQuery::dequantized() {
  if (!e4m3()) return query_;
  if (dequantized_.defined()) return dequantized_;
  const int64_t shape[3] = {query_.size(0), query_.size(1), query_.size(2)};
  const size_t bytes =
      static_cast<size_t>(shape[0] * shape[1] * shape[2]) * dtype_size(layer_dtype_);
  PAGEDATTN_CUDA_RETURN_IF_ERROR(
      cudaMallocAsync(&buffer_, bytes, static_cast<cudaStream_t>(stream_)),
      "cudaMallocAsync of " + std::to_string(bytes) + " bytes for the dequantized FP8 query");
  const TensorView out(buffer_, layer_dtype_, query_.device(), shape);
  TensorView starts;
  if (q_scale_.defined() && q_scale_.rank() == 2) {
    starts = TensorView(const_cast<int32_t*>(cu_seqlens_q_), DType::kI32, query_.device(),
                        {int64_t{num_reqs_} + 1});
  }
  PAGEDATTN_RETURN_IF_ERROR(dequantize_fp8_query(out, query_, q_scale_, starts, stream_));
  dequantized_ = out;
  return dequantized_;
}

Status ForwardQuery::bind(kernels::PagedAttentionParams& p, int first_request) {
  if (!e4m3()) return ok_status();
  if (p.q_dtype == DType::kFP8E4M3) {  // bound before the choice: kept where the FP8 kernel runs
    if (p.fp8_tensor_cores && p.generation == kernels::KernelGeneration::kV3 && !p.pack_gqa) {
      return ok_status();
    }
  } else if (p.fp8_tensor_cores && layer_dtype_ == DType::kBF16) {  // the FP8 kernel writes bf16
    kernels::PagedAttentionParams direct = p;
    direct.q = query_.data();
    direct.q_token_stride = query_.stride(0);
    direct.q_head_stride = query_.stride(1);
    direct.q_dtype = DType::kFP8E4M3;
    if (q_scale_.defined()) {
      const bool per_request = q_scale_.rank() == 2;
      direct.q_descale_req_stride = per_request ? q_scale_.stride(0) : 0;
      direct.q_descale_head_stride = per_request ? q_scale_.stride(1) : 0;
      direct.q_descale =
          q_scale_.data_as<const float>() + first_request * direct.q_descale_req_stride;
    }
    direct.generation = kernels::KernelGeneration::kV3;
    direct.pack_gqa = false;
    if (kernels::paged_attention_serves(direct).ok()) {
      direct.generation = p.generation;  // the choice is the caller's
      direct.pack_gqa = p.pack_gqa;
      p = direct;
      return ok_status();
    }
  }
  PAGEDATTN_ASSIGN_OR_RETURN(const TensorView q, dequantized());
  p.q = q.data();
  p.q_token_stride = q.stride(0);
  p.q_head_stride = q.stride(1);
  p.q_dtype = layer_dtype_;
  p.q_descale = nullptr;
  p.q_descale_req_stride = p.q_descale_head_stride = 0;
  return ok_status();
}

}  // namespace pagedattn::gpu
