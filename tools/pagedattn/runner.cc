// CaseRun: the engine-side call sequence for one case, on the host or (CUDA builds) a GPU.
#include "runner.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "common.h"
#include "pagedattn/device_info.h"
#include "pagedattn/metadata.h"
#include "reference/attention_ref.h"
#include "testing/batch_params.h"

namespace pagedattn::cli {
namespace {

class HostPlacement final : public Placement {
 public:
  HostPlacement(testing::HostBatch& batch, testing::HostTensor& output, testing::HostTensor& lse)
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
  const Operands& operands() const override { return ops_; }
  Status poison_outputs() override {
    fill_nan(output_);
    fill_nan(lse_);
    return ok_status();
  }
  Status synchronize() override { return ok_status(); }
  Status download(testing::HostBatch&, testing::HostTensor&, testing::HostTensor&) override {
    return ok_status();
  }
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
  testing::HostTensor& output_;
  testing::HostTensor& lse_;
  Operands ops_;
};

}  // namespace

void fill_nan(const testing::HostTensor& tensor) {
  // All-ones bytes are a NaN in f32, f16 and bf16 alike.
  std::memset(tensor.view().data(), 0xff, static_cast<size_t>(tensor.view().nbytes()));
}

std::unique_ptr<Placement> place_on_host(testing::HostBatch& batch, testing::HostTensor& output,
                                         testing::HostTensor& lse) {
  return std::make_unique<HostPlacement>(batch, output, lse);
}

testing::CaseSpec reorder_decode_first(const testing::CaseSpec& spec, int decode_threshold) {
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
  testing::CaseSpec out = spec;
  for (size_t i = 0; i < reorder.order.size(); ++i) {
    out.seq_lens[i] = spec.seq_lens[reorder.order[i]];
    out.query_lens[i] = spec.query_lens[reorder.order[i]];
  }
  return out;
}

StatusOr<std::unique_ptr<CaseRun>> CaseRun::prepare(const testing::CaseSpec& case_spec,
                                                    const std::string& backend_name,
                                                    CascadeMode cascade) {
  PAGEDATTN_RETURN_IF_ERROR(case_spec.validate());
  std::unique_ptr<CaseRun> run(new CaseRun());
  run->device_ = device_for_backend(backend_name);
  const AttentionSelectorConfig config = selector_config_for(case_spec, run->device_);
  PAGEDATTN_ASSIGN_OR_RETURN(BackendSelection selection,
                             select_backend(config, forced_backend(backend_name)));
  run->backend_ = selection.backend;

  KVCacheLayout layout = case_spec.kv_layout.value_or(selection.kv_cache_layout);
  if (auto required = run->backend_->required_kv_cache_layout(); required && *required != layout) {
    return invalid_argument("kv_layout = " + std::string(kv_cache_layout_name(layout)) + ": " +
                            std::string(run->backend_->name()) + " requires " +
                            std::string(kv_cache_layout_name(*required)));
  }

  const BuilderParams bp = testing::builder_params_for(case_spec, layout, run->device_);
  PAGEDATTN_ASSIGN_OR_RETURN(run->builder_, run->backend_->make_builder(bp));

  testing::CaseSpec spec = case_spec;
  if (std::optional<int> threshold = run->builder_->reorder_batch_threshold()) {
    spec = reorder_decode_first(spec, *threshold);
  }
  spec.kv_layout = layout;
  PAGEDATTN_ASSIGN_OR_RETURN(run->batch_, testing::make_host_batch(spec, layout));
  run->batch_.params.device = run->device_;
  PAGEDATTN_ASSIGN_OR_RETURN(run->impl_, run->backend_->make_impl(run->batch_.params));

  // As vLLM's model runner does: the shared prefix goes to build() only when the builder's rule
  // says a cascade pass pays off.
  if (spec.common_prefix_len > 0 && cascade != CascadeMode::kNever) {
    int num_sms = static_cast<int>(std::thread::hardware_concurrency());
    for (const CudaDeviceInfo& info : cuda_devices()) {
      if (run->device_.is_cuda() && info.index == run->device_.index) num_sms = info.num_sms;
    }
    const bool pays_off = run->builder_->use_cascade_attention(
        spec.common_prefix_len, spec.query_lens, spec.num_heads, spec.num_kv_heads, spec.alibi,
        bp.use_sliding_window(), /*use_local_attention=*/false, num_sms, /*dcp_world_size=*/1);
    if (pays_off || cascade == CascadeMode::kAlways)
      run->cascade_prefix_len_ = spec.common_prefix_len;
  }

  const int64_t tokens = spec.num_tokens();
  run->output_ = testing::HostTensor(spec.dtype, {tokens, spec.num_heads, spec.head_size});
  run->lse_ = testing::HostTensor(DType::kF32, {spec.num_heads, tokens});
  if (run->device_.is_cpu()) {
    run->placement_ = place_on_host(run->batch_, run->output_, run->lse_);
  } else {
#if PAGEDATTN_WITH_CUDA
    PAGEDATTN_ASSIGN_OR_RETURN(run->placement_, place_on_cuda(run->batch_, run->device_.index));
#else
    return unimplemented(std::string(run->backend_->name()) +
                         " needs CUDA, which this build lacks");
#endif
  }
  return run;
}

Status CaseRun::build() {
  PAGEDATTN_ASSIGN_OR_RETURN(metadata_,
                             builder_->build(cascade_prefix_len_, placement_->operands().meta));
  return ok_status();
}

Status CaseRun::update_cache() {
  if (backend_->forward_includes_kv_cache_update()) return ok_status();
  const Operands& o = placement_->operands();
  return impl_->do_kv_cache_update(o.key, o.value, o.kv_cache, o.meta.slot_mapping, o.scales);
}

Status CaseRun::forward(bool with_lse) {
  const Operands& o = placement_->operands();
  return impl_->forward(o.query, o.key, o.value, o.kv_cache, *metadata_, o.output,
                        with_lse ? o.lse : TensorView(), o.scales);
}

Status CaseRun::run_step() {
  PAGEDATTN_RETURN_IF_ERROR(placement_->poison_outputs());
  PAGEDATTN_RETURN_IF_ERROR(build());
  return execute();
}

Status CaseRun::execute() {
  PAGEDATTN_RETURN_IF_ERROR(update_cache());
  PAGEDATTN_RETURN_IF_ERROR(forward(true));
  PAGEDATTN_RETURN_IF_ERROR(placement_->synchronize());
  return placement_->download(batch_, output_, lse_);
}

StatusOr<reference::Comparison> CaseRun::verify() const {
  PAGEDATTN_ASSIGN_OR_RETURN(
      reference::ReferenceOutputs ref,
      reference::reference_attention(testing::reference_inputs(batch_, batch_.kv_cache.view()),
                                     batch_.params));
  return reference::compare_to_reference(output_.view(), lse_.view(), ref.out, ref.lse,
                                         reference::tolerance_for(batch_.spec.dtype));
}

std::string CaseRun::backend_label() const {
  return std::string(backend_->name()) + " (" + std::string(impl_->kernel_generation()) +
         (cascade_prefix_len_ > 0 ? ", cascade)" : ")");
}

}  // namespace pagedattn::cli
