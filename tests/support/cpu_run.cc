#include "support/cpu_run.h"

#include <cmath>
#include <limits>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_metadata.h"
#include "common/numeric.h"
#include "reference/attention_ref.h"
#include "testing/batch_params.h"

namespace pagedattn::cpu_test {
namespace {

void poison(const TensorView& t) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    store_from_float(t.data(), t.dtype(), i, std::numeric_limits<float>::quiet_NaN());
  }
}

StatusOr<RunResult> run(testing::HostBatch& batch, const RunOptions& options, bool write_cache) {
  const testing::CaseSpec& spec = batch.spec;
  AttentionImplParams params = batch.params;
  params.attn_type = options.attn_type;
  PAGEDATTN_ASSIGN_OR_RETURN(std::unique_ptr<AttentionImpl> impl, cpu::make_impl(params));

  const BuilderParams bp = testing::builder_params_for(spec, batch.layout, Device::cpu());
  PAGEDATTN_ASSIGN_OR_RETURN(std::unique_ptr<AttentionMetadataBuilder> builder,
                             cpu::make_builder(bp));
  PAGEDATTN_ASSIGN_OR_RETURN(std::unique_ptr<AttentionMetadata> metadata,
                             builder->build(spec.common_prefix_len, batch.metadata()));
  auto* md = dynamic_cast<cpu::CpuAttentionMetadata*>(metadata.get());
  if (md == nullptr) return internal_error("CPU_ATTN's builder returned foreign metadata");
  if (options.force_cascade) md->common_prefix_len = spec.common_prefix_len;

  const TensorView& cache = batch.kv_cache.view();
  if (write_cache) {
    PAGEDATTN_RETURN_IF_ERROR(impl->do_kv_cache_update(batch.key.view(), batch.value.view(), cache,
                                                       batch.slot_mapping.view(), batch.scales()));
  }
  const int64_t tokens = batch.query.view().size(0);
  RunResult result;
  result.cascade_prefix_len = md->common_prefix_len;
  result.output = testing::HostTensor(spec.dtype, {tokens, spec.num_heads, spec.head_size});
  result.lse = testing::HostTensor(DType::kF32, {spec.num_heads, tokens});
  poison(result.output.view());
  poison(result.lse.view());
  const TensorView lse = options.want_lse ? result.lse.view() : TensorView();
  PAGEDATTN_RETURN_IF_ERROR(impl->forward(batch.query.view(), batch.key.view(), batch.value.view(),
                                          cache, *metadata, result.output.view(), lse,
                                          batch.scales()));

  PAGEDATTN_ASSIGN_OR_RETURN(
      reference::ReferenceOutputs ref,
      reference::reference_attention(testing::reference_inputs(batch, cache), params));
  result.comparison = reference::compare_to_reference(result.output.view(), lse, ref.out, ref.lse,
                                                      reference::tolerance_for(spec.dtype));
  return result;
}

}  // namespace

StatusOr<RunResult> run_against_reference(testing::HostBatch& batch, const RunOptions& options) {
  return run(batch, options, /*write_cache=*/true);
}

StatusOr<RunResult> run_forward_only(testing::HostBatch& batch, const RunOptions& options) {
  return run(batch, options, /*write_cache=*/false);
}

}  // namespace pagedattn::cpu_test
