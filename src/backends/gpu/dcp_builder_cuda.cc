// DcpBuilder (dcp_builder.h): a sharded step's plan on the host, then one upload.
#include "backends/gpu/dcp_builder.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "backends/gpu/generation.h"
#include "pagedattn/dcp_sharding.h"
#include "plan/split_kv.h"
#include "runtime/check.h"

namespace pagedattn::gpu {
namespace {

using runtime::DeviceBuffer;

int64_t pages_for(int64_t tokens) {
  return (tokens + kDcpStagePageSize - 1) / kDcpStagePageSize;
}

std::string sharded(const DcpShard& shard) {
  return " with dcp_world_size = " + std::to_string(shard.world_size);
}

}  // namespace

BuilderParams DcpBuilder::group_params() const {
  BuilderParams group = params_;
  group.num_heads = params_.num_heads * world_size_;
  return group;
}

Status DcpBuilder::ensure_buffers(int world_size) {
  if (world_size == world_size_) return ok_status();
  world_size_ = world_size;
  const int dev = params_.device.index;
  const size_t tokens = static_cast<size_t>(params_.max_num_tokens);
  const size_t reqs = static_cast<size_t>(params_.max_num_reqs);
  const size_t row = static_cast<size_t>(params_.num_heads) * params_.head_size *
                     dtype_size(params_.dtype);  // one token's Hq heads
  const size_t lse_row = tokens * 4;             // one head's LSEs
  pages_per_request_ = static_cast<int>(pages_for(params_.max_num_tokens));
  const size_t pages = static_cast<size_t>(pages_per_request_) + reqs;
  const size_t page_bytes =
      static_cast<size_t>(kDcpStagePageSize) * params_.num_kv_heads * params_.head_size *
      dtype_size(kv_cache_storage_dtype(params_.kv_cache_dtype, params_.dtype));
  const size_t n = static_cast<size_t>(world_size);
  PAGEDATTN_ASSIGN_OR_RETURN(ints_,
                             DeviceBuffer::allocate(dev, 4 * reqs * (4 + pages_per_request_)));
  PAGEDATTN_ASSIGN_OR_RETURN(slots_, DeviceBuffer::allocate(dev, 8 * tokens));
  PAGEDATTN_ASSIGN_OR_RETURN(staged_k_, DeviceBuffer::allocate(dev, pages * page_bytes));
  PAGEDATTN_ASSIGN_OR_RETURN(staged_v_, DeviceBuffer::allocate(dev, pages * page_bytes));
  PAGEDATTN_ASSIGN_OR_RETURN(query_packed_and_context_out_,
                             DeviceBuffer::allocate(dev, tokens * row));
  PAGEDATTN_ASSIGN_OR_RETURN(query_gathered_and_partial_out_,
                             DeviceBuffer::allocate(dev, n * tokens * row));
  PAGEDATTN_ASSIGN_OR_RETURN(group_query_, DeviceBuffer::allocate(dev, n * tokens * row));
  PAGEDATTN_ASSIGN_OR_RETURN(own_out_, DeviceBuffer::allocate(dev, tokens * row));
  const size_t heads = static_cast<size_t>(params_.num_heads);
  PAGEDATTN_ASSIGN_OR_RETURN(partial_lse_, DeviceBuffer::allocate(dev, n * heads * lse_row));
  PAGEDATTN_ASSIGN_OR_RETURN(context_lse_, DeviceBuffer::allocate(dev, heads * lse_row));
  PAGEDATTN_ASSIGN_OR_RETURN(own_lse_, DeviceBuffer::allocate(dev, heads * lse_row));
  context_layout_ = plan::split_workspace_layout(params_.max_num_tokens,
                                                 params_.num_heads * world_size, params_.head_size);
  PAGEDATTN_ASSIGN_OR_RETURN(context_split_, SplitWorkspace::allocate(dev, context_layout_));
  return ok_status();
}

StatusOr<DcpStep> DcpBuilder::plan(int common_prefix_len, const CommonAttentionMetadata& meta,
                                   const StepLengths& lengths) {
  const DcpShard shard = meta.dcp_shard();
  const std::string where = backend_ + " builder: ";
  if (common_prefix_len != 0) {
    // As in vLLM: a shared prefix is sharded like any context, and no pass would read it once.
    return invalid_argument(where + "common_prefix_len = " + std::to_string(common_prefix_len) +
                            sharded(shard) +
                            ": no cascade under decode context parallelism, as vLLM (allowed: 0)");
  }
  PAGEDATTN_RETURN_IF_ERROR(
      check_dcp_head_split(params_.num_heads, params_.num_kv_heads, shard.world_size));
  PAGEDATTN_RETURN_IF_ERROR(ensure_buffers(shard.world_size));

  const int n = meta.num_reqs;
  const int64_t reqs = params_.max_num_reqs;
  const std::span<const int32_t> qsl = lengths.query_start_loc;
  const int num_tokens = qsl[n];
  // Host plan in the device layout: [context lens | splits | query lens | query positions] of
  // max_num_reqs each, then the staging page table.
  int stride = 1;
  for (int r = 0; r < n; ++r) {
    stride = std::max<int>(stride, static_cast<int>(pages_for(qsl[r + 1] - qsl[r])));
  }
  ints_host_.assign(4 * reqs + int64_t{n} * stride, 0);
  const std::span<int32_t> context_lens(ints_host_.data(), n);
  const std::span<int32_t> splits(ints_host_.data() + reqs, n);
  const std::span<int32_t> query_lens(ints_host_.data() + 2 * reqs, n);
  const std::span<int32_t> query_positions(ints_host_.data() + 3 * reqs, n);
  int32_t* page_table = ints_host_.data() + 4 * reqs;
  slots_host_.resize(num_tokens);
  planner_keys_.resize(n);
  int max_context = 0, first_page = 0;
  bool empty_context = false;
  for (int r = 0; r < n; ++r) {
    const int query_len = qsl[r + 1] - qsl[r];
    context_lens[r] =
        static_cast<int32_t>(dcp_local_length(lengths.seq_lens[r] - query_len, shard));
    max_context = std::max(max_context, context_lens[r]);
    empty_context = empty_context || context_lens[r] == 0;
    // The split planner wants keys >= queries; the queries follow the context, which is split.
    planner_keys_[r] = context_lens[r] + query_len;
    query_lens[r] = query_len;
    query_positions[r] = lengths.seq_lens[r] - query_len;
    const int pages = static_cast<int>(pages_for(query_len));
    for (int p = 0; p < pages; ++p) page_table[int64_t{r} * stride + p] = first_page + p;
    for (int i = 0; i < query_len; ++i) {
      slots_host_[qsl[r] + i] = int64_t{first_page} * kDcpStagePageSize + i;
    }
    first_page += pages;
  }

  const BuilderParams group = group_params();
  const plan::SplitKVConfig config =
      split_config(group, num_sms_, num_tokens, context_layout_.token_splits);
  PAGEDATTN_ASSIGN_OR_RETURN(const plan::SplitSchedule schedule,
                             plan::plan_split_kv(qsl, planner_keys_, config));
  std::copy(schedule.num_splits_per_req.begin(), schedule.num_splits_per_req.end(), splits.begin());

  runtime::ScopedDevice guard(params_.device.index);
  PAGEDATTN_RETURN_IF_ERROR(guard.status());
  PAGEDATTN_RETURN_IF_ERROR(copy_ints_to_device(ints_host_, ints_, "the DCP step's lengths"));
  if (num_tokens > 0) {
    // Pageable memory: the copy has read slots_host_ when cudaMemcpyAsync returns.
    PAGEDATTN_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(slots_.data(), slots_host_.data(), 8 * slots_host_.size(),
                        cudaMemcpyHostToDevice, nullptr),
        "copying the DCP staging slots");
  }

  DcpStep s;
  s.enabled = true;
  s.shard = shard;
  s.num_tokens = num_tokens;
  s.group_heads = group.num_heads;
  const int32_t* ints = ints_.as<const int32_t>();

  s.context = pass_metadata(meta);
  s.context.seqused_k = ints;
  s.context.max_seq_len = max_context;
  s.context.causal = false;  // every context key precedes every new token
  s.context.num_splits_per_req = ints + reqs;
  s.context.max_num_splits = config.max_splits;
  s.context.max_splits_used = schedule.max_splits_used;
  // v3 expects every row to see a key (a request this rank stores no context of has none), and
  // only v2 cuts a window at absolute positions among a rank's keys.
  const bool windowed = params_.sliding_window.enabled();
  s.context.kernel = empty_context || windowed
                         ? PassKernel::kV2
                         : builder_pass_kernel(group, qsl, context_lens, false);
  s.context_split = context_split_.view();
  if (windowed) s.context_query_pos = ints + 3 * reqs;

  s.own_kv_heads = dcp_kv_heads_of_rank(params_.num_kv_heads, shard.world_size, shard.rank);
  BuilderParams own_layer = params_;
  own_layer.num_kv_heads = s.own_kv_heads.count;
  s.own = pass_metadata(meta);
  s.own.seqused_k = ints + 2 * reqs;
  s.own.block_table = ints + 4 * reqs;
  s.own.block_table_stride = stride;
  s.own.max_seq_len = meta.max_query_len;
  s.own.kernel = builder_pass_kernel(own_layer, qsl, query_lens, meta.causal);

  s.staged_k = staged_k_.data();
  s.staged_v = staged_v_.data();
  s.staged_pages = pages_per_request_ + reqs;
  s.staged_slots = slots_.as<const int64_t>();

  s.query_packed = query_packed_and_context_out_.data();
  s.context_out = query_packed_and_context_out_.data();
  s.query_gathered = query_gathered_and_partial_out_.data();
  s.partial_out = query_gathered_and_partial_out_.data();
  s.group_query = group_query_.data();
  s.own_out = own_out_.data();
  s.partial_lse = partial_lse_.as<float>();
  s.context_lse = context_lse_.as<float>();
  s.own_lse = own_lse_.as<float>();
  s.lse_stride = params_.max_num_tokens;
  return s;
}

}  // namespace pagedattn::gpu
