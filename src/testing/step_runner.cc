// StepRunner: the engine-side call sequence of one step, on the host or (CUDA builds) a GPU.
#include "testing/step_runner.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "pagedattn/config.h"  // PAGEDATTN_WITH_CUDA
#include "pagedattn/device_info.h"
#include "reference/attention_ref.h"
#include "testing/batch_params.h"

namespace pagedattn::testing {
namespace {

class HostPlacement final : public Placement {
 public:
  HostPlacement(HostBatch& batch, HostTensor& output, HostTensor& lse)
      : output_(output), lse_(lse) {
    ops_.query = batch.query.view();
    ops_.key = batch.key.view();
    ops_.value = batch.value.view();
    ops_.kv_cache = batch.kv_cache.view();
    ops_.output = output.view();
    ops_.lse = lse.view();
    ops_.scales = batch.scales();
    ops_.meta = batch.metadata();
  }
  const StepOperands& operands() const override { return ops_; }
  Status poison_outputs() override {
    fill_nan(output_);
    fill_nan(lse_);
    return ok_status();
  }
  Status synchronize() override { return ok_status(); }
  Status download(HostBatch&, HostTensor&, HostTensor&) override { return ok_status(); }
  StatusOr<std::vector<double>> time_ms(const std::function<Status()>& fn, int warmup,
                                        int repeats) override {
    for (int i = 0; i < warmup; ++i) PAGEDATTN_RETURN_IF_ERROR(fn());
    std::vector<double> times;
    for (int i = 0; i < repeats; ++i) {
      const auto start = std::chrono::steady_clock::now();
      PAGEDATTN_RETURN_IF_ERROR(fn());
      const auto stop = std::chrono::steady_clock::now();
      times.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    }
    return times;
  }

 private:
  HostTensor& output_;
  HostTensor& lse_;
  StepOperands ops_;
};

// What use_cascade_attention is told about parallelism: the device's SMs, or the host's threads.
int parallel_units(const Device& device) {
  int units = static_cast<int>(std::thread::hardware_concurrency());
  for (const CudaDeviceInfo& info : cuda_devices()) {
    if (device.is_cuda() && info.index == device.index) units = info.num_sms;
  }
  return units;
}

}  // namespace

void fill_nan(const HostTensor& tensor) {
  // All-ones bytes are a NaN in f32, f16 and bf16 alike.
  std::memset(tensor.view().data(), 0xff, static_cast<size_t>(tensor.view().nbytes()));
}

std::unique_ptr<Placement> place_on_host(HostBatch& batch, HostTensor& output, HostTensor& lse) {
  return std::make_unique<HostPlacement>(batch, output, lse);
}

#if !PAGEDATTN_WITH_CUDA
StatusOr<std::unique_ptr<Placement>> place_on_cuda(const HostBatch&, int) {
  return unimplemented("a CUDA device needs CUDA, which this build lacks");
}
#endif

CaseSpec reorder_decode_first(const CaseSpec& spec, int decode_threshold) {
  std::vector<ScheduledRequest> requests;
  for (int r = 0; r < spec.num_reqs(); ++r) {
    const int q = spec.query_lens[r], context = spec.seq_lens[r] - q;
    // A request past its prompt decodes; anything longer is (part of) a prompt.
    requests.push_back(
        {q, context, q <= decode_threshold && context > 0 ? context : spec.seq_lens[r]});
  }
  const BatchReorder reorder =
      reorder_batch_to_split_decodes_and_prefills(requests, decode_threshold);
  if (!reorder.modified) return spec;
  CaseSpec out = spec;
  for (size_t i = 0; i < reorder.order.size(); ++i) {
    out.seq_lens[i] = spec.seq_lens[reorder.order[i]];
    out.query_lens[i] = spec.query_lens[reorder.order[i]];
  }
  return out;
}

StatusOr<std::unique_ptr<StepRunner>> StepRunner::prepare(const CaseSpec& case_spec,
                                                          const AttentionBackend& backend,
                                                          const Device& device,
                                                          KVCacheLayout layout,
                                                          const StepOptions& options) {
  PAGEDATTN_RETURN_IF_ERROR(case_spec.validate());
  std::unique_ptr<StepRunner> run(new StepRunner());
  run->backend_ = &backend;
  run->device_ = device;
  const BuilderParams bp =
      options.builder_params.value_or(builder_params_for(case_spec, device));
  PAGEDATTN_ASSIGN_OR_RETURN(run->builder_, backend.make_builder(bp));
  CaseSpec spec = case_spec;
  if (std::optional<int> threshold = run->builder_->reorder_batch_threshold()) {
    spec = reorder_decode_first(spec, *threshold);
  }
  spec.kv_layout = layout;
  PAGEDATTN_ASSIGN_OR_RETURN(run->owned_batch_, make_host_batch(spec, layout));
  run->batch_ = &*run->owned_batch_;
  PAGEDATTN_RETURN_IF_ERROR(run->init(bp, options));
  return run;
}

StatusOr<std::unique_ptr<StepRunner>> StepRunner::for_batch(HostBatch& batch,
                                                            const AttentionBackend& backend,
                                                            const Device& device,
                                                            const StepOptions& options) {
  std::unique_ptr<StepRunner> run(new StepRunner());
  run->backend_ = &backend;
  run->device_ = device;
  run->batch_ = &batch;
  const BuilderParams bp =
      options.builder_params.value_or(builder_params_for(batch.spec, device));
  PAGEDATTN_ASSIGN_OR_RETURN(run->builder_, backend.make_builder(bp));
  PAGEDATTN_RETURN_IF_ERROR(run->init(bp, options));
  return run;
}

Status StepRunner::init(const BuilderParams& bp, const StepOptions& options) {
  HostBatch& batch = *batch_;
  const CaseSpec& spec = batch.spec;
  AttentionImplParams params = batch.params;
  params.device = device_;
  if (options.attn_type) params.attn_type = *options.attn_type;
  params.kernel_generation = options.kernel_generation;
  // The batch's own permission stays; the option adds it for an e4m3 cache's cases.
  if (options.fp8_tensor_cores && spec.kv_cache_dtype == KVCacheDType::kFP8E4M3) {
    params.fp8_tensor_cores = true;
  }
  PAGEDATTN_ASSIGN_OR_RETURN(impl_, backend_->make_impl(params));

  // As vLLM's model runner does: the shared prefix goes to build() only when the builder's rule
  // says a cascade pass pays off (or the caller insists).
  if (spec.common_prefix_len > 0 && options.cascade != CascadeMode::kNever) {
    const bool pays_off = builder_->use_cascade_attention(
        spec.common_prefix_len, spec.query_lens, spec.num_heads, spec.num_kv_heads, spec.alibi,
        bp.use_sliding_window(), /*use_local_attention=*/false, parallel_units(device_),
        /*dcp_world_size=*/1);
    if (pays_off || options.cascade == CascadeMode::kAlways) {
      cascade_prefix_len_ = spec.common_prefix_len;
    }
  }

  const int64_t tokens = spec.num_tokens();
  output_ = HostTensor(spec.dtype, {tokens, spec.num_heads, spec.head_size});
  lse_ = HostTensor(DType::kF32, {spec.num_heads, tokens});
  if (device_.is_cpu()) {
    placement_ = place_on_host(batch, output_, lse_);
    return ok_status();
  }
  PAGEDATTN_ASSIGN_OR_RETURN(placement_, place_on_cuda(batch, device_.index));
  return ok_status();
}

Status StepRunner::build() {
  PAGEDATTN_ASSIGN_OR_RETURN(metadata_,
                             builder_->build(cascade_prefix_len_, placement_->operands().meta));
  return ok_status();
}

Status StepRunner::update_cache() {
  if (backend_->forward_includes_kv_cache_update()) return ok_status();
  const StepOperands& o = placement_->operands();
  return impl_->do_kv_cache_update(o.key, o.value, o.kv_cache, o.meta.slot_mapping, o.scales);
}

Status StepRunner::forward(bool with_lse) {
  with_lse_ = with_lse;
  const StepOperands& o = placement_->operands();
  return impl_->forward(o.query, o.key, o.value, o.kv_cache, *metadata_, o.output,
                        with_lse ? o.lse : TensorView(), o.scales);
}

Status StepRunner::execute(const TensorView& query, const KVScales& scales, bool with_lse) {
  with_lse_ = with_lse;
  const StepOperands& o = placement_->operands();
  PAGEDATTN_RETURN_IF_ERROR(impl_->forward(query, o.key, o.value, o.kv_cache, *metadata_, o.output,
                                           with_lse ? o.lse : TensorView(), scales));
  PAGEDATTN_RETURN_IF_ERROR(placement_->synchronize());
  return placement_->download(*batch_, output_, lse_);
}

Status StepRunner::execute(bool write_cache, bool with_lse) {
  if (write_cache) PAGEDATTN_RETURN_IF_ERROR(update_cache());
  PAGEDATTN_RETURN_IF_ERROR(forward(with_lse));
  PAGEDATTN_RETURN_IF_ERROR(placement_->synchronize());
  return placement_->download(*batch_, output_, lse_);
}

Status StepRunner::run_step(bool write_cache, bool with_lse) {
  PAGEDATTN_RETURN_IF_ERROR(placement_->poison_outputs());
  PAGEDATTN_RETURN_IF_ERROR(build());
  return execute(write_cache, with_lse);
}

StatusOr<reference::Comparison> StepRunner::verify() const {
  PAGEDATTN_ASSIGN_OR_RETURN(
      reference::ReferenceOutputs ref,
      reference::reference_attention(reference_inputs(*batch_, batch_->kv_cache.view()),
                                     impl_->params()));
  return reference::compare_to_reference(output_.view(), with_lse_ ? lse_.view() : TensorView(),
                                         ref.out, ref.lse,
                                         reference::tolerance_for(batch_->spec.dtype));
}

std::string StepRunner::backend_label() const {
  return std::string(backend_->name()) + " (" + std::string(impl_->kernel_generation()) +
         (cascade_prefix_len_ > 0 ? ", cascade)" : ")");
}

}  // namespace pagedattn::testing
