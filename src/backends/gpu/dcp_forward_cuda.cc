// The steps of run_dcp_forward (dcp_forward.h), each enqueued on the layer's stream.
#include <cuda_runtime.h>

#include <string>

#include "backends/gpu/dcp_forward.h"
#include "kernels/cache_write.h"
#include "kernels/merge_states.h"
#include "pagedattn/communicator.h"
#include "pagedattn/dcp_combine.h"
#include "runtime/check.h"

namespace pagedattn::gpu {
namespace {

// Rows [T, heads, D] of a contiguous scratch, and LSEs [heads, T] with the scratch's stride.
TensorView scratch_rows(void* data, const AttentionImplParams& layer, int64_t tokens,
                        int64_t heads) {
  const int64_t d = layer.head_size;
  const int64_t shape[] = {tokens, heads, d}, strides[] = {heads * d, d, 1};
  return TensorView(data, layer.dtype, layer.device, shape, strides);
}
TensorView scratch_lse(float* data, const AttentionImplParams& layer, int64_t heads, int64_t tokens,
                       int64_t stride) {
  const int64_t shape[] = {heads, tokens}, strides[] = {stride, 1};
  return TensorView(data, DType::kF32, layer.device, shape, strides);
}

}  // namespace

Status gather_group_query(const DcpStep& dcp, const AttentionImplParams& layer,
                          const TensorView& query, StreamHandle stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const size_t element = dtype_size(layer.dtype);
  const size_t rank_row = static_cast<size_t>(layer.num_heads) * layer.head_size * element;
  const size_t tokens = static_cast<size_t>(dcp.num_tokens);
  // One row's token stride is never stepped over, and may be anything.
  const size_t query_pitch = tokens > 1 ? static_cast<size_t>(query.stride(0)) * element : rank_row;
  PAGEDATTN_CUDA_RETURN_IF_ERROR(
      cudaMemcpy2DAsync(dcp.query_packed, rank_row, query.data(), query_pitch, rank_row, tokens,
                        cudaMemcpyDeviceToDevice, s),
      "packing the query rows for the DCP gather");
  const int64_t count = static_cast<int64_t>(tokens * rank_row / element);
  PAGEDATTN_RETURN_IF_ERROR(layer.dcp_group->all_gather(
      TensorView(dcp.query_packed, layer.dtype, layer.device, {count}),
      TensorView(dcp.query_gathered, layer.dtype, layer.device, {dcp.shard.world_size * count}),
      stream));
  // Rank r's rows [T, Hq, D] become heads [r Hq, (r + 1) Hq) of every group row.
  for (int r = 0; r < dcp.shard.world_size; ++r) {
    PAGEDATTN_CUDA_RETURN_IF_ERROR(
        cudaMemcpy2DAsync(static_cast<char*>(dcp.group_query) + r * rank_row,
                          dcp.shard.world_size * rank_row,
                          static_cast<const char*>(dcp.query_gathered) + r * tokens * rank_row,
                          rank_row, rank_row, tokens, cudaMemcpyDeviceToDevice, s),
        "laying out rank " + std::to_string(r) + "'s query heads");
  }
  return ok_status();
}

kernels::PagedAttentionParams context_pass_launch(
    const DcpStep& dcp, const kernels::PagedAttentionParams& layer_launch) {
  kernels::PagedAttentionParams p = layer_launch;
  const int64_t row = int64_t{dcp.group_heads} * p.head_size;
  p.q = dcp.group_query;
  p.q_token_stride = row;
  p.q_head_stride = p.head_size;
  p.num_heads = dcp.group_heads;
  p.out = dcp.partial_out;
  p.out_token_stride = row;
  p.out_head_stride = p.head_size;
  p.lse = dcp.partial_lse;
  p.lse_head_stride = dcp.lse_stride;
  p.sinks = nullptr;
  p.split_out = dcp.context_split.out;
  p.split_lse = dcp.context_split.lse;
  if (dcp.context_query_pos != nullptr) {
    p.key_shard = dcp.shard;
    p.query_pos0 = dcp.context_query_pos;
  }
  return p;
}

Status combine_context(const DcpStep& dcp, const AttentionImplParams& layer, StreamHandle stream) {
  const int64_t t = dcp.num_tokens;
  return dcp_combine(*layer.dcp_group, layer.dcp_comm_backend,
                     scratch_rows(dcp.partial_out, layer, t, dcp.group_heads),
                     scratch_lse(dcp.partial_lse, layer, dcp.group_heads, t, dcp.lse_stride),
                     scratch_rows(dcp.context_out, layer, t, layer.num_heads),
                     scratch_lse(dcp.context_lse, layer, layer.num_heads, t, dcp.lse_stride),
                     stream);
}

Status stage_new_tokens(const DcpStep& dcp, const AttentionImplParams& layer, const TensorView& key,
                        const TensorView& value, const KVScales& scales, StreamHandle stream) {
  const DType storage = kv_cache_storage_dtype(layer.kv_cache_dtype, layer.dtype);
  const int64_t plane[] = {dcp.staged_pages, kDcpStagePageSize, layer.num_kv_heads,
                           layer.head_size};
  const KVCacheView staged(TensorView(dcp.staged_k, storage, layer.device, plane),
                           TensorView(dcp.staged_v, storage, layer.device, plane));
  const TensorView slots(const_cast<int64_t*>(dcp.staged_slots), DType::kI64, layer.device,
                         {int64_t{dcp.num_tokens}});
  return kernels::launch_cache_write(key, value, staged, slots, scales.k_scale, scales.v_scale,
                                     stream);
}

kernels::PagedAttentionParams own_pass_launch(const DcpStep& dcp, const AttentionImplParams& layer,
                                              const kernels::PagedAttentionParams& layer_launch,
                                              const float* sinks) {
  kernels::PagedAttentionParams p = layer_launch;
  const int64_t first_head = int64_t{dcp.own_kv_heads.first} * layer.head_size *
                             static_cast<int64_t>(dtype_size(p.cache_dtype));
  p.k_cache = static_cast<const char*>(dcp.staged_k) + first_head;
  p.v_cache = static_cast<const char*>(dcp.staged_v) + first_head;
  p.cache_token_stride = int64_t{layer.num_kv_heads} * layer.head_size;
  p.cache_block_stride = kDcpStagePageSize * p.cache_token_stride;
  p.cache_head_stride = layer.head_size;
  p.block_size = kDcpStagePageSize;
  p.num_kv_heads = dcp.own_kv_heads.count;
  if (p.per_head_scales) {  // [Hkv]: this rank's heads start at its first KV head
    p.k_scale += dcp.own_kv_heads.first;
    p.v_scale += dcp.own_kv_heads.first;
  }
  p.out = dcp.own_out;
  p.out_token_stride = int64_t{layer.num_heads} * layer.head_size;
  p.out_head_stride = layer.head_size;
  p.lse = dcp.own_lse;
  p.lse_head_stride = dcp.lse_stride;
  p.sinks = sinks;
  return p;
}

Status merge_passes(const DcpStep& dcp, const AttentionImplParams& layer, const TensorView& output,
                    const TensorView& output_lse, StreamHandle stream) {
  const int64_t t = dcp.num_tokens, h = layer.num_heads, d = layer.head_size;
  const int64_t rows_shape[] = {t, h, d}, out_strides[] = {output.stride(0), output.stride(1), 1};
  const TensorView out(output.data(), output.dtype(), layer.device, rows_shape, out_strides);
  TensorView out_lse;
  if (output_lse.defined()) {
    const int64_t lse_shape[] = {h, t}, lse_strides[] = {output_lse.stride(0), 1};
    out_lse = TensorView(output_lse.data(), DType::kF32, layer.device, lse_shape, lse_strides);
  }
  return kernels::launch_merge_attn_states(
      out, scratch_rows(dcp.context_out, layer, t, h),
      scratch_lse(dcp.context_lse, layer, h, t, dcp.lse_stride),
      scratch_rows(dcp.own_out, layer, t, h), scratch_lse(dcp.own_lse, layer, h, t, dcp.lse_stride),
      out_lse, t, stream);
}

}  // namespace pagedattn::gpu
