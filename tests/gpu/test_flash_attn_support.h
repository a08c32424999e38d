// Shared by the FLASH_ATTN GPU tests: run a HostBatch through the backend on cuda:0 with the step
// runner (cache write, build, forward), write the new tokens into a host copy of the cache with the
// host encoder, and compare against the float64 oracle.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "pagedattn/backend.h"
#include "reference/attention_ref.h"
#include "reference/compare.h"
#include "testing/batch_params.h"
#include "testing/device_batch.h"
#include "testing/host_batch.h"
#include "testing/host_cache_write.h"
#include "testing/step_runner.h"

namespace pagedattn::test {

// A host copy of the batch's cache with the new tokens written on the host.
inline KVCacheAllocation host_cache_after_write(const testing::HostBatch& batch) {
  const TensorView& src = batch.kv_cache.view();
  KVCacheShape shape{};
  for (int i = 0; i < 5; ++i) shape[i] = src.size(i);
  StatusOr<KVCacheAllocation> copy =
      KVCacheAllocation::allocate(shape, src.dtype(), batch.kv_cache.layout(), Device::cpu());
  EXPECT_TRUE(copy.ok()) << copy.status().to_string();
  std::memcpy(copy->view().data(), src.data(), static_cast<size_t>(src.nbytes()));
  testing::write_tokens_on_host(
      batch.key.view(), batch.value.view(),
      {batch.slot_mapping.data<int64_t>(), static_cast<size_t>(batch.slot_mapping.view().size(0))},
      batch.scales(), copy->view());
  return std::move(copy).value();
}

inline BuilderParams builder_params_for(const testing::HostBatch& batch) {
  BuilderParams bp = testing::builder_params_for(batch.spec, Device::cuda(0));
  // Tight persistent buffers (the split workspace and bounds scale with them) and a roomy model.
  bp.max_num_reqs = std::max(8, batch.spec.num_reqs());
  bp.max_num_tokens = static_cast<int>(std::max<int64_t>(64, batch.spec.num_tokens()));
  bp.max_model_len = 1 << 17;
  return bp;
}

inline AttentionImplParams impl_params_for(const testing::HostBatch& batch) {
  AttentionImplParams p = batch.params;
  p.device = Device::cuda(0);
  return p;
}

// One step through FLASH_ATTN on cuda:0 with testing::StepRunner: cache write, build (with the
// case's common_prefix_len, always), forward with LSE; results downloaded (the batch's cache is
// replaced by the device's).
inline StatusOr<std::unique_ptr<testing::StepRunner>> run_flash_attn(testing::HostBatch& batch) {
  const AttentionBackend* backend = find_backend("FLASH_ATTN");
  if (backend == nullptr) return not_found("FLASH_ATTN is not registered");
  testing::StepOptions options;
  options.cascade = testing::CascadeMode::kAlways;
  options.builder_params = builder_params_for(batch);
  PAGEDATTN_ASSIGN_OR_RETURN(std::unique_ptr<testing::StepRunner> run,
                             testing::StepRunner::for_batch(batch, *backend, Device::cuda(0), options));
  PAGEDATTN_RETURN_IF_ERROR(run->run_step());
  return run;
}

// The oracle over the host-written cache.
inline reference::ReferenceOutputs oracle(const testing::HostBatch& batch, const TensorView& cache) {
  StatusOr<reference::ReferenceOutputs> ref =
      reference::reference_attention(testing::reference_inputs(batch, cache), batch.params);
  EXPECT_TRUE(ref.ok()) << ref.status().to_string();
  return ref.ok() ? std::move(ref).value() : reference::ReferenceOutputs{};
}

// The oracle over `expected_cache` (the batch's cache with the new tokens written on the host,
// taken before the run: the device's cache write is checked too, context slots included).
inline reference::Comparison compare_with_oracle(const testing::StepRunner& run,
                                                 const KVCacheAllocation& expected_cache) {
  const testing::HostBatch& batch = run.batch();
  const reference::ReferenceOutputs ref = oracle(batch, expected_cache.view());
  return reference::compare_to_reference(run.output().view(), run.lse().view(), ref.out, ref.lse,
                                         reference::tolerance_for(batch.spec.dtype));
}

// `output` [T, Hq, D] of a step of `spec` (after any reorder) in `layout` against the oracle of a
// decoder layer with the mask `causal`, over a fresh batch of the same case (the same tokens) with
// the new tokens written on the host. No LSE: the output alone tells the masks apart.
inline reference::Comparison compare_with_mask(testing::CaseSpec spec, KVCacheLayout layout,
                                               const TensorView& output, bool causal) {
  spec.causal = causal;
  StatusOr<testing::HostBatch> batch = testing::make_host_batch(spec, layout);
  EXPECT_TRUE(batch.ok()) << batch.status().to_string();
  if (!batch.ok()) return {};
  const KVCacheAllocation cache = host_cache_after_write(*batch);
  const reference::ReferenceOutputs ref = oracle(*batch, cache.view());
  return reference::compare_to_reference(output, TensorView(), ref.out, ref.lse,
                                         reference::tolerance_for(spec.dtype));
}

// An encoder or encoder-only layer (`type`) through `backend_name` on cuda:0 in a step whose
// metadata says causal: vLLM runs those layers with causal=False, so the result is the
// bidirectional one. `spec` holds first prefills only (every key a new token).
inline void expect_encoder_layer_bidirectional(const std::string& backend_name,
                                               const testing::CaseSpec& spec, AttentionType type) {
  const AttentionBackend* backend = find_backend(backend_name);
  ASSERT_NE(backend, nullptr) << backend_name;
  ASSERT_TRUE(spec.causal) << spec.name;
  testing::StepOptions options;
  options.attn_type = type;
  BuilderParams bp = testing::builder_params_for(spec, Device::cuda(0));
  bp.max_model_len = 1 << 17;
  options.builder_params = bp;
  StatusOr<std::unique_ptr<testing::StepRunner>> run =
      testing::StepRunner::prepare(spec, *backend, Device::cuda(0), KVCacheLayout::kNHD, options);
  ASSERT_TRUE(run.ok()) << spec.name << ": " << run.status().to_string();
  const Status st = (*run)->run_step();
  ASSERT_TRUE(st.ok()) << spec.name << ": " << st.to_string();
  const std::string what = backend_name + " " + std::string(attention_type_name(type));
  const TensorView& out = (*run)->output().view();
  const testing::CaseSpec& ran = (*run)->spec();
  const reference::Comparison bidirectional =
      compare_with_mask(ran, KVCacheLayout::kNHD, out, /*causal=*/false);
  EXPECT_TRUE(bidirectional.pass) << what << ": max abs " << bidirectional.max_abs_error << "\n"
                                  << bidirectional.detail;
  EXPECT_FALSE(compare_with_mask(ran, KVCacheLayout::kNHD, out, /*causal=*/true).pass) << what;
}

// The whole check for one case: runs, compares, and reports the errors in the failure message.
inline void expect_matches_oracle(const testing::CaseSpec& spec,
                                  KVCacheLayout layout = KVCacheLayout::kNHD) {
  StatusOr<testing::HostBatch> batch = testing::make_host_batch(spec, layout);
  ASSERT_TRUE(batch.ok()) << spec.name << ": " << batch.status().to_string();
  const KVCacheAllocation expected_cache = host_cache_after_write(*batch);
  StatusOr<std::unique_ptr<testing::StepRunner>> run = run_flash_attn(*batch);
  ASSERT_TRUE(run.ok()) << spec.name << ": " << run.status().to_string();
  // v3 where it serves the launch on a Hopper GPU, v2 otherwise, the decode kernel for decode
  // rows: the oracle judges each.
  std::string_view generation = (*run)->kernel_generation();
  if (generation.starts_with("decode+")) generation.remove_prefix(7);
  EXPECT_TRUE(generation == "v2" || generation == "v3" || generation == "v3/v2") << generation;
  const reference::Comparison c = compare_with_oracle(**run, expected_cache);
  EXPECT_TRUE(c.pass) << spec.name << " (" << kv_cache_layout_name(layout) << "): " << c;
}

}  // namespace pagedattn::test
