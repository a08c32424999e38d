// Test support for CPU_ATTN under DCP: one HostBatch (the whole step, N * Hq query heads, every
// context token in one cache) cut into N ranks as an engine would hold them: each rank a cache of
// its own (unused slots NaN, block ids shuffled) with the context tokens it stores, its local block
// table and slot mapping, its metadata, and its share of the query heads. Ranks run on threads.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "pagedattn/backend.h"
#include "pagedattn/communicator.h"
#include "pagedattn/dcp_sharding.h"
#include "testing/host_batch.h"
#include "unit/dcp_ranks.h"

namespace pagedattn::testing {

// Every element of a host cache set to its storage format's NaN.
inline void fill_cache_nan(const TensorView& cache) {
  auto* bytes = static_cast<std::byte*>(cache.data());
  const size_t n = static_cast<size_t>(cache.numel());
  switch (cache.dtype()) {
    case DType::kF32: {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      for (size_t i = 0; i < n; ++i) std::memcpy(bytes + 4 * i, &nan, 4);
      break;
    }
    case DType::kF16:
    case DType::kBF16: {
      const uint16_t nan = cache.dtype() == DType::kF16 ? 0x7E00 : 0x7FC0;
      for (size_t i = 0; i < n; ++i) std::memcpy(bytes + 2 * i, &nan, 2);
      break;
    }
    default: std::memset(bytes, 0x7F, n); break;  // NaN in e4m3 and e5m2
  }
}

// One rank's share of a step.
struct DcpRankStep {
  int rank = 0;
  KVCacheAllocation cache;
  HostTensor block_table;  // [B, max local blocks] int32, this rank's block ids
  HostTensor slot_mapping;  // [T] int64, -1 where another rank stores the token
  HostTensor output;        // [T, Hq, D], NaN until forward writes it
  HostTensor lse;           // [Hq, T] f32
  CommonAttentionMetadata meta;
  TensorView query;  // [T, Hq, D]: this rank's heads of the batch's query, strided
  BuilderParams builder;
  AttentionImplParams impl;
};

inline StatusOr<DcpRankStep> make_dcp_rank_step(const HostBatch& batch, int world_size, int rank,
                                                int interleave, Communicator* group,
                                                DcpCommBackend path) {
  const CaseSpec& spec = batch.spec;
  const DcpShard shard{world_size, rank, interleave};
  const int bs = spec.block_size, hkv = spec.num_kv_heads, d = spec.head_size;
  const int hq = spec.num_heads / world_size;
  const int num_reqs = spec.num_reqs();
  const int64_t num_tokens = spec.num_tokens();
  DcpRankStep step;
  step.rank = rank;

  int64_t max_blocks = 1, needed = 0;
  for (int r = 0; r < num_reqs; ++r) {
    const int64_t blocks = (dcp_local_length(spec.seq_lens[r], shard) + bs - 1) / bs;
    max_blocks = std::max(max_blocks, blocks);
    needed += blocks;
  }
  const int64_t num_blocks = needed + 3;
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(static_cast<uint32_t>(spec.seed * 31 + rank)));
  step.block_table = HostTensor(DType::kI32, {num_reqs, max_blocks});
  int32_t* table = step.block_table.data<int32_t>();
  std::fill_n(table, num_reqs * max_blocks, 0);
  for (int r = 0, next = 0; r < num_reqs; ++r) {
    const int64_t blocks = (dcp_local_length(spec.seq_lens[r], shard) + bs - 1) / bs;
    for (int64_t k = 0; k < blocks; ++k) table[r * max_blocks + k] = ids[next++];
  }

  const TensorView& whole = batch.kv_cache.view();
  PAGEDATTN_ASSIGN_OR_RETURN(KVCacheShape shape,
                             get_kv_cache_shape(num_blocks, bs, hkv, d, spec.kv_cache_dtype));
  PAGEDATTN_ASSIGN_OR_RETURN(step.cache, KVCacheAllocation::allocate(shape, whole.dtype(),
                                                                     batch.layout, Device::cpu()));
  const TensorView& mine = step.cache.view();
  fill_cache_nan(mine);
  // The context tokens this rank stores, bit for bit from the whole cache.
  const int32_t* whole_table = batch.block_table.data<int32_t>();
  const int64_t whole_width = batch.block_table.view().size(1);
  const size_t element = dtype_size(whole.dtype());
  for (int r = 0; r < num_reqs; ++r) {
    const int context = spec.seq_lens[r] - spec.query_lens[r];
    for (int p = 0; p < context; ++p) {
      if (dcp_owner_rank(p, world_size, interleave) != rank) continue;
      const int64_t lp = dcp_local_position(p, world_size, interleave);
      for (int plane = 0; plane < 2; ++plane) {
        for (int h = 0; h < hkv; ++h) {
          const int64_t from = whole_table[r * whole_width + p / bs] * whole.stride(0) +
                               plane * whole.stride(1) + (p % bs) * whole.stride(2) +
                               h * whole.stride(3);
          const int64_t to = table[r * max_blocks + lp / bs] * mine.stride(0) +
                             plane * mine.stride(1) + (lp % bs) * mine.stride(2) +
                             h * mine.stride(3);
          std::memcpy(static_cast<std::byte*>(mine.data()) + to * element,
                      static_cast<const std::byte*>(whole.data()) + from * element, d * element);
        }
      }
    }
  }

  step.slot_mapping = HostTensor(DType::kI64, {num_tokens});
  const TensorView& qsl = batch.query_start_loc.view();
  const TensorView& seqs = batch.seq_lens.view();
  PAGEDATTN_RETURN_IF_ERROR(dcp_slot_mapping(
      {qsl.data_as<const int32_t>(), static_cast<size_t>(num_reqs + 1)},
      {seqs.data_as<const int32_t>(), static_cast<size_t>(num_reqs)},
      {table, static_cast<size_t>(num_reqs * max_blocks)}, max_blocks, bs, shard,
      {step.slot_mapping.data<int64_t>(), static_cast<size_t>(num_tokens)}));

  step.meta = batch.metadata();
  step.meta.block_table_tensor = step.block_table.view();
  step.meta.slot_mapping = step.slot_mapping.view();
  step.meta.dcp_world_size = world_size;
  step.meta.dcp_rank = rank;
  step.meta.cp_kv_cache_interleave_size = interleave;

  const TensorView& q = batch.query.view();
  const int64_t q_shape[3] = {num_tokens, hq, d};
  const int64_t q_strides[3] = {q.stride(0), q.stride(1), q.stride(2)};
  step.query = TensorView(static_cast<std::byte*>(q.data()) +
                              int64_t{rank} * hq * d * static_cast<int64_t>(dtype_size(q.dtype())),
                          q.dtype(), Device::cpu(), q_shape, q_strides);
  step.output = HostTensor(spec.dtype, {num_tokens, hq, d});
  fill_cache_nan(step.output.view());
  step.lse = HostTensor(DType::kF32, {hq, num_tokens});
  fill_cache_nan(step.lse.view());

  step.impl = batch.params;
  step.impl.num_heads = hq;
  if (!step.impl.sinks.empty()) {
    step.impl.sinks.assign(batch.params.sinks.begin() + rank * hq,
                           batch.params.sinks.begin() + (rank + 1) * hq);
  }
  step.impl.dcp_group = group;
  step.impl.dcp_comm_backend = path;
  step.builder.num_heads = hq;
  step.builder.num_kv_heads = hkv;
  step.builder.head_size = d;
  step.builder.block_size = bs;
  step.builder.dtype = spec.dtype;
  step.builder.kv_cache_dtype = spec.kv_cache_dtype;
  step.builder.sliding_window = batch.params.sliding_window;
  return step;
}

// Builds, writes the new tokens and runs forward on every rank, each on its own thread.
inline std::vector<Status> run_dcp_ranks(const HostBatch& batch, std::vector<DcpRankStep>& steps,
                                         std::vector<std::unique_ptr<Communicator>>& group) {
  const AttentionBackend* backend = find_backend("CPU_ATTN");
  return run_on_ranks(group, [&](Communicator& comm) -> Status {
    DcpRankStep& step = steps[comm.rank()];
    PAGEDATTN_ASSIGN_OR_RETURN(auto builder, backend->make_builder(step.builder));
    PAGEDATTN_ASSIGN_OR_RETURN(auto impl, backend->make_impl(step.impl));
    PAGEDATTN_ASSIGN_OR_RETURN(auto metadata, builder->build(0, step.meta));
    const KVCacheView cache(step.cache.view());
    PAGEDATTN_RETURN_IF_ERROR(impl->do_kv_cache_update(batch.key.view(), batch.value.view(), cache,
                                                       step.slot_mapping.view(), batch.scales()));
    return impl->forward(step.query, batch.key.view(), batch.value.view(), cache, *metadata,
                         step.output.view(), step.lse.view(), batch.scales());
  });
}

}  // namespace pagedattn::testing
