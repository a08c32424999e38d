// DcpExecutor: N = 1 beside N ranks on threads, one step at a time.
#include "serve/dcp_executor.h"

#include <chrono>
#include <thread>

#include "pagedattn/dcp_combine.h"
#include "pagedattn/dcp_heads.h"
#include "pagedattn/selector.h"

namespace pagedattn::serve {
namespace {

constexpr const char* kDcpBackend = "CPU_ATTN";

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

StatusOr<std::unique_ptr<DcpExecutor>> DcpExecutor::create(const ExecutorConfig& config,
                                                           const DcpConfig& dcp) {
  const ModelShape& m = config.model;
  const std::string n = std::to_string(dcp.world_size);
  if (dcp.world_size < 2 || dcp.world_size > DcpShard::kMaxWorldSize) {
    return invalid_argument("--dcp " + n + ": DCP needs 2 to " +
                            std::to_string(DcpShard::kMaxWorldSize) + " ranks");
  }
  if (m.num_heads % dcp.world_size != 0) {
    return invalid_argument("--dcp " + n + ": the model's " + std::to_string(m.num_heads) +
                            " query heads do not split evenly over " + n + " ranks");
  }
  PAGEDATTN_RETURN_IF_ERROR(
      check_dcp_head_split(m.num_heads / dcp.world_size, m.num_kv_heads, dcp.world_size));
  std::unique_ptr<DcpExecutor> e(new DcpExecutor());
  e->model_ = m;
  e->dcp_ = dcp;
  e->max_tokens_ = config.max_num_batched_tokens;
  e->backend_ = find_backend(kDcpBackend);

  ExecutorConfig single = config;
  single.model.block_size = m.block_size * dcp.world_size;
  single.backend = kDcpBackend;
  single.cuda_graphs = false;
  PAGEDATTN_ASSIGN_OR_RETURN(e->single_, Executor::create(single));

  PAGEDATTN_ASSIGN_OR_RETURN(e->group_, make_in_process_group(dcp.world_size));
  e->group_of_layer_.assign(m.num_layers, 0);
  int g = 0;
  for (const LayerGroup& lg : m.layer_groups()) {
    for (int l : lg.layers) e->group_of_layer_[l] = g;
    ++g;
  }
  e->ranks_.resize(dcp.world_size);
  for (int r = 0; r < dcp.world_size; ++r) PAGEDATTN_RETURN_IF_ERROR(e->make_rank(config, r));
  return e;
}

// The rank's layers (its heads and sinks, the group), selected, cached and built as an engine does.
Status DcpExecutor::make_rank(const ExecutorConfig& config, int r) {
  const ModelShape& m = model_;
  const int hq = m.num_heads / dcp_.world_size;
  Rank& rank = ranks_[r];
  rank.comm = std::make_unique<testing::CountedCommunicator>(*group_[r]);
  for (const LayerGroup& lg : m.layer_groups()) {
    AttentionLayer layer =
        attention_layer_of(m, lg.window, KVCacheLayout::kNHD, Device::cpu(), config.seed);
    layer.num_heads = hq;
    if (!layer.sinks.empty()) {
      layer.sinks.assign(layer.sinks.begin() + r * hq, layer.sinks.begin() + (r + 1) * hq);
    }
    layer.dcp_group = rank.comm.get();
    layer.dcp_comm_backend = dcp_.comm_backend;
    PAGEDATTN_ASSIGN_OR_RETURN(const BackendSelection selection,
                               select_backend(selector_config(layer), kDcpBackend));
    layer.kv_layout = selection.kv_cache_layout;
    BuilderParams bp = builder_params(layer);
    bp.max_num_reqs = config.max_num_seqs;
    bp.max_num_tokens = config.max_num_batched_tokens;
    bp.max_model_len = m.max_model_len;
    PAGEDATTN_ASSIGN_OR_RETURN(auto builder, backend_->make_builder(bp));
    rank.builders.push_back(std::move(builder));
    rank.layers.push_back(layer);
  }
  rank.metadata.resize(rank.builders.size());
  const DType storage = kv_cache_storage_dtype(m.kv_cache_dtype, m.dtype);
  PAGEDATTN_ASSIGN_OR_RETURN(
      const KVCacheShape shape,
      backend_->get_kv_cache_shape(config.num_blocks, m.block_size, m.num_kv_heads, m.head_size,
                                   m.kv_cache_dtype));
  const size_t output_elems = static_cast<size_t>(max_tokens_) * hq * m.head_size;
  for (int l = 0; l < m.num_layers; ++l) {
    const AttentionLayer& layer = rank.layers[group_of_layer_[l]];
    PAGEDATTN_ASSIGN_OR_RETURN(
        KVCacheAllocation cache,
        KVCacheAllocation::allocate(shape, storage, layer.kv_layout, Device::cpu()));
    // Unused slots NaN, so a read of another rank's block shows in the check; the null block zero.
    auto* bytes = static_cast<unsigned char*>(cache.view().data());
    std::fill_n(bytes, cache.nbytes(), 0xFF);
    std::fill_n(bytes, cache.view().stride(0) * dtype_size(storage), 0);
    rank.caches.push_back(std::move(cache));
    PAGEDATTN_ASSIGN_OR_RETURN(auto impl, backend_->make_impl(impl_params(layer)));
    rank.impls.push_back(std::move(impl));
    rank.outputs.emplace_back(output_elems);
  }
  rank.slots.resize(max_tokens_);
  return ok_status();
}

std::string DcpExecutor::label() const {
  return std::string(kDcpBackend) + " DCP " + std::to_string(dcp_.world_size) + " ranks (" +
         std::string(dcp_comm_backend_name(dcp_.comm_backend)) + ")";
}

int64_t DcpExecutor::rank_kv_cache_bytes() const {
  int64_t bytes = 0;
  for (const KVCacheAllocation& cache : ranks_[0].caches) bytes += cache.nbytes();
  return bytes;
}

Status DcpExecutor::on_every_rank(const std::function<Status(Rank&, int)>& body) {
  std::vector<Status> results(ranks_.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    threads.emplace_back([&, r] { results[r] = body(ranks_[r], static_cast<int>(r)); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < results.size(); ++r) {
    if (!results[r].ok()) {
      return Status(results[r].code(), "rank " + std::to_string(r) + ": " + results[r].message());
    }
  }
  return ok_status();
}

CommonAttentionMetadata DcpExecutor::rank_metadata(const StepBatch& b, Rank& rank) const {
  CommonAttentionMetadata m;
  const int64_t n = b.num_reqs;
  m.query_start_loc = TensorView(const_cast<int32_t*>(b.query_start_loc.data()), DType::kI32,
                                 Device::cpu(), {n + 1});
  m.query_start_loc_cpu = m.query_start_loc;
  m.seq_lens = TensorView(const_cast<int32_t*>(b.seq_lens.data()), DType::kI32, Device::cpu(), {n});
  m.seq_lens_cpu = m.seq_lens;
  m.num_reqs = b.num_reqs;
  m.num_actual_tokens = b.num_tokens;
  m.max_query_len = b.max_query_len;
  m.max_seq_len = b.max_seq_len;
  m.block_table_tensor = TensorView(const_cast<int32_t*>(b.block_table.data()), DType::kI32,
                                    Device::cpu(), {n, int64_t{b.table_width}});
  m.slot_mapping =
      TensorView(rank.slots.data(), DType::kI64, Device::cpu(), {int64_t{b.num_tokens}});
  m.causal = true;
  shard_step(rank.layers[0], m);
  return m;
}

TensorView DcpExecutor::rank_output(const Rank& rank, int layer, int64_t tokens) const {
  const int hq = model_.num_heads / dcp_.world_size;
  return TensorView(const_cast<uint16_t*>(rank.outputs[layer].data()), model_.dtype, Device::cpu(),
                    {tokens, hq, model_.head_size});
}

// The rank's heads of the step's query (a strided view), the step's K and V: each rank writes the
// new tokens it stores and attends its heads.
Status DcpExecutor::run_rank_layers(const StepBatch& b, Rank& rank, int r) {
  const int64_t t = b.num_tokens;
  const int hq = model_.num_heads / dcp_.world_size, d = model_.head_size;
  const TensorView q = single_->step_query(t);
  const int64_t offset = int64_t{r} * hq * d * static_cast<int64_t>(dtype_size(q.dtype()));
  const int64_t shape[3] = {t, hq, d};
  const int64_t strides[3] = {q.stride(0), q.stride(1), q.stride(2)};
  const TensorView rank_q(static_cast<std::byte*>(q.data()) + offset, q.dtype(), Device::cpu(),
                          shape, strides);
  const TensorView k = single_->step_key(t), v = single_->step_value(t);
  const TensorView slots(rank.slots.data(), DType::kI64, Device::cpu(), {t});
  const TensorView scale(&one_, DType::kF32, Device::cpu(), {1});
  const KVScales scales{scale, scale};
  for (int l = 0; l < model_.num_layers; ++l) {
    AttentionImpl& impl = *rank.impls[l];
    const TensorView& cache = rank.caches[l].view();
    if (!backend_->forward_includes_kv_cache_update()) {
      PAGEDATTN_RETURN_IF_ERROR(impl.do_kv_cache_update(k, v, cache, slots, scales));
    }
    PAGEDATTN_RETURN_IF_ERROR(impl.forward(rank_q, k, v, cache, *rank.metadata[group_of_layer_[l]],
                                           rank_output(rank, l, t), TensorView(), scales));
  }
  return ok_status();
}

StatusOr<StepResult> DcpExecutor::run_step(const StepBatch& batch) {
  StepBatch step = batch;
  step.common_prefix_len = 0;
  PAGEDATTN_ASSIGN_OR_RETURN(const StepResult single, single_->run_step(step));
  StepResult result;
  result.single_rank_ms = single.attention_ms;
  result.kv_bytes = single.kv_bytes;

  const DcpShard shard0 = dcp_shard(ranks_[0].layers[0]);
  const auto build_start = std::chrono::steady_clock::now();
  PAGEDATTN_RETURN_IF_ERROR(on_every_rank([&](Rank& rank, int r) -> Status {
    const DcpShard shard{shard0.world_size, r, shard0.interleave};
    PAGEDATTN_RETURN_IF_ERROR(dcp_slot_mapping(
        step.query_start_loc, step.seq_lens, step.block_table, step.table_width, model_.block_size,
        shard, std::span<int64_t>(rank.slots.data(), step.num_tokens)));
    const CommonAttentionMetadata meta = rank_metadata(step, rank);
    for (size_t g = 0; g < rank.builders.size(); ++g) {
      PAGEDATTN_ASSIGN_OR_RETURN(rank.metadata[g], rank.builders[g]->build(0, meta));
    }
    return ok_status();
  }));
  result.build_ms = ms_since(build_start);

  const auto start = std::chrono::steady_clock::now();
  PAGEDATTN_RETURN_IF_ERROR(
      on_every_rank([&](Rank& rank, int r) { return run_rank_layers(step, rank, r); }));
  result.attention_ms = ms_since(start);
  for (Rank& rank : ranks_) {
    result.dcp_received_bytes =
        std::max(result.dcp_received_bytes, rank.comm->take_received_bytes());
  }
  return result;
}

}  // namespace pagedattn::serve
