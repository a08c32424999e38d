// AttentionImplParams::fp8_tensor_cores through FLASH_ATTN and FLASHINFER on cuda:0: a prefill
// step over an e4m3 cache runs on the v3 FP8 kernel where the layer permits it (within the FP8
// bounds of tests/gpu/test_v3_fp8.cc against the float64 oracle), on v2 without the permission
// and where the FP8 kernel cannot serve the launch (pages of 16 and, at D 128, 64 keys), at the
// 16-bit tolerance.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fp8_prefill_support.h"
#include "test_flash_attn_support.h"
#include "test_v3_support.h"

namespace pagedattn::test {
namespace {

struct Fp8Run {
  std::string generation;  // the impl's kernel_generation(), "decode+" dropped
  reference::Comparison cmp;
};

Fp8Run run_step(const std::string& backend_name, const testing::CaseSpec& spec, bool permitted) {
  Fp8Run result;
  const AttentionBackend* backend = find_backend(backend_name);
  EXPECT_NE(backend, nullptr) << backend_name;
  if (backend == nullptr) return result;
  StatusOr<testing::HostBatch> batch = testing::make_host_batch(spec, KVCacheLayout::kNHD);
  EXPECT_TRUE(batch.ok()) << batch.status().to_string();
  if (!batch.ok()) return result;
  batch->params.fp8_tensor_cores = permitted;
  const KVCacheAllocation expected_cache = host_cache_after_write(*batch);
  testing::StepOptions options;
  options.builder_params = builder_params_for(*batch);
  StatusOr<std::unique_ptr<testing::StepRunner>> run =
      testing::StepRunner::for_batch(*batch, *backend, Device::cuda(0), options);
  EXPECT_TRUE(run.ok()) << run.status().to_string();
  if (!run.ok()) return result;
  const Status st = (*run)->run_step();
  EXPECT_TRUE(st.ok()) << backend_name << " " << spec.name << ": " << st.to_string();
  std::string_view generation = (*run)->kernel_generation();
  if (generation.starts_with("decode+")) generation.remove_prefix(7);
  result.generation = std::string(generation);
  result.cmp = compare_with_oracle(**run, expected_cache);
  std::printf("FP8TC %-10s %-22s %-9s %-3s max_abs %.4g rel_frob %.4g lse %.4g\n",
              backend_name.c_str(), spec.name.c_str(), permitted ? "permitted" : "not", generation.data(),
              result.cmp.max_abs_error, result.cmp.rel_frobenius, result.cmp.max_lse_error);
  return result;
}

TEST(Fp8TensorCores, PrefillsRunOnTheFp8TensorCoresWherePermitted) {
  PAGEDATTN_REQUIRE_V3();
  for (const std::string backend : {"FLASH_ATTN", "FLASHINFER"}) {
    for (int d : fp8_kernel_head_sizes()) {
      const testing::CaseSpec spec = fp8_prefill_step("fp8_tc", d, 128);
      const Fp8Run fp8 = run_step(backend, spec, true);
      EXPECT_EQ(fp8.generation, "v3") << backend << " " << spec.name;
      EXPECT_LT(fp8.cmp.rel_frobenius, kFp8RelFrobenius) << backend << " " << spec.name;
      EXPECT_LT(fp8.cmp.max_abs_error, kFp8MaxAbs) << backend << " " << spec.name;
      EXPECT_LT(fp8.cmp.max_lse_error, kFp8MaxLse) << backend << " " << spec.name;
      // The FP8 kernel's error is its own: the same step converting the cache meets bf16's.
      const Fp8Run converted = run_step(backend, spec, false);
      EXPECT_EQ(converted.generation, "v2") << backend << " " << spec.name;
      EXPECT_TRUE(converted.cmp.pass) << backend << " " << spec.name << ": " << converted.cmp;
      EXPECT_GT(fp8.cmp.rel_frobenius, converted.cmp.rel_frobenius) << backend << " " << spec.name;
    }
  }
}

TEST(Fp8TensorCores, LaunchesTheFp8KernelCannotServeConvertTheCache) {
  PAGEDATTN_REQUIRE_V3();
  for (const std::string backend : {"FLASH_ATTN", "FLASHINFER"}) {
    for (const int block : {16, 64}) {  // D 128's FP8 tiles need pages of 128 keys
      const testing::CaseSpec spec = fp8_prefill_step("fp8_tc", 128, block);
      const Fp8Run run = run_step(backend, spec, true);
      EXPECT_EQ(run.generation, "v2") << backend << " " << spec.name;
      EXPECT_TRUE(run.cmp.pass) << backend << " " << spec.name << ": " << run.cmp;
    }
  }
}

}  // namespace
}  // namespace pagedattn::test
