// Executor: creation (selection, caches, builders, impls, persistent buffers) and one step.
#include "serve/executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "common/checked_math.h"
#include "common/numeric.h"
#include "pagedattn/device_info.h"
#include "pagedattn/selector.h"

namespace pagedattn::serve {
namespace {

// vLLM's CUDA-graph capture sizes for decode batches: 1, 2, 4, then every multiple of 8.
bool is_capture_size(int n) {
  return n == 1 || n == 2 || n == 4 || n % 8 == 0;
}

}  // namespace

StatusOr<std::unique_ptr<Executor>> Executor::create(const ExecutorConfig& config) {
  const ModelShape& m = config.model;
  if (m.dtype != DType::kBF16 && m.dtype != DType::kF16) {
    return invalid_argument("dtype = " + std::string(dtype_name(m.dtype)) +
                            "; serve runs f16 or bf16");
  }
  std::unique_ptr<Executor> e(new Executor());
  e->model_ = m;
  e->rng_.seed(config.seed ^ 0x5E57E5ull);
  const std::optional<std::string_view> forced =
      config.backend == "auto" ? std::nullopt : std::optional<std::string_view>(config.backend);
  const AttentionBackend* named = forced ? find_backend(*forced) : nullptr;
  if (forced && named == nullptr) return not_found("unknown backend '" + config.backend + "'");
  e->device_ = named ? (named->supports_device(DeviceKind::kCPU) ? Device::cpu() : Device::cuda(0))
                     : default_device();
  PAGEDATTN_ASSIGN_OR_RETURN(BackendSelection selection,
                             select_backend(selector_config_for(m, e->device_), forced));
  e->backend_ = selection.backend;
  if (e->device_.is_cpu()) {
    e->ops_ = make_host_ops();
    e->num_sms_ = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  } else {
    PAGEDATTN_ASSIGN_OR_RETURN(e->ops_, make_cuda_ops(e->device_.index));
    for (const CudaDeviceInfo& info : cuda_devices()) {
      if (info.index == e->device_.index) e->num_sms_ = info.num_sms;
    }
  }
  e->max_tokens_ = config.max_num_batched_tokens;
  e->max_reqs_ = config.max_num_seqs;
  e->table_width_ = (m.max_model_len + m.block_size - 1) / m.block_size;
  e->storage_ = kv_cache_storage_dtype(m.kv_cache_dtype, m.dtype);

  // One cache per layer: the backend's shape, the selected layout. Unused bytes are NaN so that a
  // read of a block the request does not own shows in the oracle check; the null block is zero.
  PAGEDATTN_ASSIGN_OR_RETURN(
      const KVCacheShape shape,
      e->backend_->get_kv_cache_shape(config.num_blocks, m.block_size, m.num_kv_heads, m.head_size,
                                      m.kv_cache_dtype));
  const KVCacheLayout layout = selection.kv_cache_layout;
  PAGEDATTN_RETURN_IF_ERROR(e->check_memory(config, shape));
  for (int l = 0; l < m.num_layers; ++l) {
    PAGEDATTN_ASSIGN_OR_RETURN(KVCacheAllocation cache,
                               KVCacheAllocation::allocate(shape, e->storage_, layout, e->device_));
    const size_t block_bytes =
        static_cast<size_t>(cache.view().stride(0)) * dtype_size(e->storage_);
    PAGEDATTN_RETURN_IF_ERROR(e->ops_->fill(cache.view().data(), 0xFF, cache.nbytes()));
    PAGEDATTN_RETURN_IF_ERROR(e->ops_->fill(cache.view().data(), 0, block_bytes));
    e->caches_.push_back(std::move(cache));
  }

  e->group_of_layer_.assign(m.num_layers, 0);
  e->impls_.resize(m.num_layers);
  e->graphs_ = config.cuda_graphs && e->ops_->supports_graphs();
  for (const LayerGroup& lg : m.layer_groups()) {
    const AttentionLayer layer = attention_layer_of(m, lg.window, layout, e->device_, config.seed);
    BuilderParams bp = builder_params(layer);
    bp.max_num_reqs = config.max_num_seqs;
    bp.max_num_tokens = config.max_num_batched_tokens;
    bp.max_model_len = m.max_model_len;
    Group g;
    g.layers = lg.layers;
    g.window = lg.window;
    PAGEDATTN_ASSIGN_OR_RETURN(g.builder, e->backend_->make_builder(bp));
    if (g.builder->cudagraph_support() == AttentionCGSupport::kNever) e->graphs_ = false;
    for (int l : lg.layers) {
      PAGEDATTN_ASSIGN_OR_RETURN(e->impls_[l], e->backend_->make_impl(impl_params(layer)));
      e->group_of_layer_[l] = static_cast<int>(e->groups_.size());
    }
    e->groups_.push_back(std::move(g));
  }
  PAGEDATTN_RETURN_IF_ERROR(e->allocate(config));
  return e;
}

// Every layer's cache and output, counted before anything is allocated: on the host the kernel
// would kill the process for touching more than there is instead of failing an allocation.
Status Executor::check_memory(const ExecutorConfig& config, const KVCacheShape& shape) const {
  const ModelShape& m = model_;
  const auto cache = checked_product({shape[0], shape[1], shape[2], shape[3], shape[4],
                                      static_cast<int64_t>(dtype_size(storage_))});
  const auto output = checked_product({config.max_num_batched_tokens, m.num_heads, m.head_size,
                                       static_cast<int64_t>(dtype_size(m.dtype))});
  const auto layer = cache && output ? checked_add(*cache, *output) : std::nullopt;
  const auto needed = layer ? checked_mul(*layer, m.num_layers) : std::nullopt;
  PAGEDATTN_ASSIGN_OR_RETURN(const uint64_t available, ops_->available_bytes());
  if (!needed || static_cast<uint64_t>(*needed) > available) {
    const auto mib = [](int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; };
    return invalid_argument(
        "the KV caches and outputs of " + std::to_string(m.num_layers) + " layers need " +
        (needed ? mib(*needed) : std::string("more than 2^63 bytes")) + " (" +
        (layer ? mib(*layer) : std::string("too much")) + " per layer with " +
        std::to_string(config.num_blocks) + " blocks) but " + device_name(device_) + " has " +
        mib(static_cast<int64_t>(available)) + " available; use fewer --num-blocks or --num-layers");
  }
  return ok_status();
}

Status Executor::allocate(const ExecutorConfig& config) {
  const int64_t q_elems = int64_t{max_tokens_} * model_.num_heads * model_.head_size;
  const size_t esize = dtype_size(model_.dtype);
  auto alloc = [&](void*& out, size_t bytes) -> Status {
    PAGEDATTN_ASSIGN_OR_RETURN(out, ops_->allocate(bytes));
    return ok_status();
  };
  PAGEDATTN_RETURN_IF_ERROR(alloc(buf_.query, q_elems * esize));
  const int64_t kv_elems = int64_t{max_tokens_} * model_.num_kv_heads * model_.head_size;
  PAGEDATTN_RETURN_IF_ERROR(alloc(buf_.key, kv_elems * esize));
  PAGEDATTN_RETURN_IF_ERROR(alloc(buf_.value, kv_elems * esize));
  PAGEDATTN_RETURN_IF_ERROR(alloc(buf_.qsl, 4 * (max_reqs_ + 1)));
  PAGEDATTN_RETURN_IF_ERROR(alloc(buf_.seq_lens, 4 * max_reqs_));
  PAGEDATTN_RETURN_IF_ERROR(alloc(buf_.block_table, size_t{4} * max_reqs_ * table_width_));
  PAGEDATTN_RETURN_IF_ERROR(alloc(buf_.slots, 8 * max_tokens_));
  PAGEDATTN_RETURN_IF_ERROR(alloc(buf_.scale, 4));
  const float one = 1.0f;
  PAGEDATTN_RETURN_IF_ERROR(ops_->upload(buf_.scale, &one, 4));
  buf_.outputs.resize(model_.num_layers);
  for (void*& out : buf_.outputs) PAGEDATTN_RETURN_IF_ERROR(alloc(out, q_elems * esize));

  // The pool the step's Q/K/V are cut from: uniform values in [-2, 2), generated once.
  pool_.resize(static_cast<size_t>(q_elems + (int64_t{1} << 16)));
  std::mt19937_64 pool_rng(config.seed ^ 0x9001ull);
  for (uint16_t& x : pool_) {
    const float v = static_cast<float>(pool_rng() >> 40) * 0x1.0p-22f - 2.0f;
    store_from_float(&x, model_.dtype, 0, v);
  }
  PAGEDATTN_RETURN_IF_ERROR(alloc(pool_device_, pool_.size() * 2));
  PAGEDATTN_RETURN_IF_ERROR(ops_->upload(pool_device_, pool_.data(), pool_.size() * 2));
  return ops_->synchronize();
}

std::string Executor::label() const {
  return std::string(backend_->name()) + " (" + std::string(impls_[0]->kernel_generation()) + ")";
}

std::optional<int> Executor::reorder_threshold() const {
  std::optional<int> t;
  for (const Group& g : groups_) {
    if (auto own = g.builder->reorder_batch_threshold()) t = t ? std::min(*t, *own) : *own;
  }
  return t;
}

TensorView Executor::rows(void* data, int64_t tokens, int heads) const {
  return TensorView(data, model_.dtype, device_, {tokens, heads, model_.head_size});
}

TensorView Executor::step_query(int64_t tokens) const {
  return rows(buf_.query, tokens, model_.num_heads);
}

TensorView Executor::step_key(int64_t tokens) const {
  return rows(buf_.key, tokens, model_.num_kv_heads);
}

TensorView Executor::step_value(int64_t tokens) const {
  return rows(buf_.value, tokens, model_.num_kv_heads);
}

TensorView Executor::step_output(int layer, int64_t tokens) const {
  return rows(buf_.outputs[layer], tokens, model_.num_heads);
}

int64_t Executor::kv_cache_bytes() const {
  int64_t bytes = 0;
  for (const KVCacheAllocation& cache : caches_) bytes += static_cast<int64_t>(cache.nbytes());
  return bytes;
}

int Executor::graph_batch_size(int num_reqs) const {
  const int largest = std::min(max_reqs_, max_tokens_);  // a padded step still fits the buffers
  for (int n = num_reqs; n <= largest; ++n) {
    if (is_capture_size(n) || n == largest) return n;
  }
  return 0;
}

StepBatch Executor::pad_for_graph(const StepBatch& batch, int num_reqs) const {
  // Padding requests: one query token, one key in the null block, slot -1 (nothing written).
  StepBatch p = batch;
  for (int r = batch.num_reqs; r < num_reqs; ++r) {
    p.query_start_loc.push_back(p.query_start_loc.back() + 1);
    p.seq_lens.push_back(1);
    p.query_lens.push_back(1);
    p.slot_mapping.push_back(-1);
  }
  p.block_table.resize(static_cast<size_t>(num_reqs) * table_width_, 0);
  p.num_reqs = p.num_tokens = num_reqs;
  p.max_query_len = 1;
  p.max_seq_len = model_.max_model_len;  // the bound every replay of this graph stays under
  return p;
}

Status Executor::upload(const StepBatch& b) {
  PAGEDATTN_RETURN_IF_ERROR(ops_->upload(buf_.qsl, b.query_start_loc.data(), 4 * (b.num_reqs + 1)));
  PAGEDATTN_RETURN_IF_ERROR(ops_->upload(buf_.seq_lens, b.seq_lens.data(), 4 * b.num_reqs));
  PAGEDATTN_RETURN_IF_ERROR(
      ops_->upload(buf_.block_table, b.block_table.data(), 4 * b.block_table.size()));
  PAGEDATTN_RETURN_IF_ERROR(
      ops_->upload(buf_.slots, b.slot_mapping.data(), 8 * b.slot_mapping.size()));
  // Fresh Q/K/V: windows of the pool at new offsets every step.
  const int64_t row_q = int64_t{model_.num_heads} * model_.head_size;
  const int64_t row_kv = int64_t{model_.num_kv_heads} * model_.head_size;
  const int64_t slack = static_cast<int64_t>(pool_.size()) - int64_t{max_tokens_} * row_q;
  q_offset_ = static_cast<int64_t>(rng_() % static_cast<uint64_t>(slack)) / 8 * 8;
  k_offset_ = static_cast<int64_t>(rng_() % static_cast<uint64_t>(slack)) / 8 * 8;
  v_offset_ = static_cast<int64_t>(rng_() % static_cast<uint64_t>(slack)) / 8 * 8;
  const size_t esize = dtype_size(model_.dtype);
  auto from_pool = [&](int64_t offset) {
    return static_cast<char*>(pool_device_) + offset * esize;
  };
  PAGEDATTN_RETURN_IF_ERROR(
      ops_->copy(buf_.query, from_pool(q_offset_), b.num_tokens * row_q * esize));
  PAGEDATTN_RETURN_IF_ERROR(
      ops_->copy(buf_.key, from_pool(k_offset_), b.num_tokens * row_kv * esize));
  return ops_->copy(buf_.value, from_pool(v_offset_), b.num_tokens * row_kv * esize);
}

CommonAttentionMetadata Executor::metadata_for(const StepBatch& b) const {
  CommonAttentionMetadata m;
  const int64_t n = b.num_reqs;
  m.query_start_loc = TensorView(buf_.qsl, DType::kI32, device_, {n + 1});
  m.query_start_loc_cpu = TensorView(const_cast<int32_t*>(b.query_start_loc.data()), DType::kI32,
                                     Device::cpu(), {n + 1});
  m.seq_lens = TensorView(buf_.seq_lens, DType::kI32, device_, {n});
  m.seq_lens_cpu =
      TensorView(const_cast<int32_t*>(b.seq_lens.data()), DType::kI32, Device::cpu(), {n});
  m.num_reqs = b.num_reqs;
  m.num_actual_tokens = b.num_tokens;
  m.max_query_len = b.max_query_len;
  m.max_seq_len = b.max_seq_len;
  m.block_table_tensor = TensorView(buf_.block_table, DType::kI32, device_, {n, table_width_});
  m.slot_mapping = TensorView(buf_.slots, DType::kI64, device_, {int64_t{b.num_tokens}});
  m.causal = true;
  return m;
}

Status Executor::run_layers(const StepBatch& b) {
  const TensorView q = rows(buf_.query, b.num_tokens, model_.num_heads);
  const TensorView k = rows(buf_.key, b.num_tokens, model_.num_kv_heads);
  const TensorView v = rows(buf_.value, b.num_tokens, model_.num_kv_heads);
  const TensorView slots(buf_.slots, DType::kI64, device_, {int64_t{b.num_tokens}});
  const TensorView scale(buf_.scale, DType::kF32, device_, {1});
  const KVScales scales{scale, scale};
  for (int l = 0; l < model_.num_layers; ++l) {
    AttentionImpl& impl = *impls_[l];
    const TensorView& cache = caches_[l].view();
    if (!backend_->forward_includes_kv_cache_update()) {
      PAGEDATTN_RETURN_IF_ERROR(
          impl.do_kv_cache_update(k, v, cache, slots, scales, ops_->stream()));
    }
    const AttentionMetadata& md = *groups_[group_of_layer_[l]].metadata;
    PAGEDATTN_RETURN_IF_ERROR(impl.forward(q, k, v, cache, md,
                                           rows(buf_.outputs[l], b.num_tokens, model_.num_heads),
                                           TensorView(), scales, ops_->stream()));
  }
  return ok_status();
}

double Executor::kv_bytes_read(const StepBatch& b, int cascade_prefix_len) const {
  const double token_bytes = 2.0 * model_.num_kv_heads * model_.head_size * dtype_size(storage_);
  double bytes = 0.0;
  for (const Group& g : groups_) {
    double keys = cascade_prefix_len;  // the prefix pass reads the shared blocks once
    for (int r = 0; r < b.num_reqs; ++r) {
      double seen = b.seq_lens[r] - cascade_prefix_len;
      if (g.window.left >= 0) seen = std::min<double>(seen, g.window.left + b.query_lens[r]);
      keys += seen;
    }
    bytes += keys * token_bytes * static_cast<double>(g.layers.size());
  }
  return bytes;
}

StatusOr<StepResult> Executor::run_step(const StepBatch& batch) {
  StepResult result;
  int cascade_len = 0;
  if (batch.common_prefix_len > 0) {
    bool all = true;  // one cascade decision per step: every group's rule must agree
    for (const Group& g : groups_) {
      all = all && g.builder->use_cascade_attention(batch.common_prefix_len, batch.query_lens,
                                                    model_.num_heads, model_.num_kv_heads, false,
                                                    g.window.enabled(), false, num_sms_, 1);
    }
    if (all) cascade_len = batch.common_prefix_len;
  }
  const int graph_size =
      graphs_ && batch.decode_only && cascade_len == 0 ? graph_batch_size(batch.num_reqs) : 0;
  const StepBatch padded = graph_size > 0 ? pad_for_graph(batch, graph_size) : StepBatch();
  const StepBatch& step = graph_size > 0 ? padded : batch;
  PAGEDATTN_RETURN_IF_ERROR(upload(step));
  const CommonAttentionMetadata meta = metadata_for(step);

  const auto build_start = std::chrono::steady_clock::now();
  for (Group& g : groups_) {  // a step that runs as a graph is built as one, captured or replayed
    PAGEDATTN_ASSIGN_OR_RETURN(g.metadata, graph_size > 0
                                               ? g.builder->build_for_cudagraph_capture(meta)
                                               : g.builder->build(cascade_len, meta));
  }
  result.build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - build_start)
          .count();
  if (graph_size > 0 && !ops_->has_graph(graph_size)) {
    const Status captured = ops_->capture(graph_size, [&] { return run_layers(step); });
    if (!captured.ok()) {  // say so once and run every step eagerly from here on
      graphs_ = false;
      graph_error_ = "CUDA graph capture failed, steps run eagerly: " + captured.to_string();
      return run_step(batch);
    }
  }
  PAGEDATTN_ASSIGN_OR_RETURN(result.attention_ms, ops_->time([&] {
    return graph_size > 0 ? ops_->replay(graph_size) : run_layers(step);
  }));
  result.cascade = cascade_len > 0;
  result.graph = graph_size > 0;
  result.graph_batch = graph_size;
  result.kv_bytes = kv_bytes_read(batch, cascade_len);
  return result;
}

}  // namespace pagedattn::serve
