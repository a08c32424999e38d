// AttentionImplParams::fp8_tensor_cores through FLASH_ATTN and FLASHINFER on cuda:0: a prefill
// step over an e4m3 cache runs on the v3 FP8 kernel where the layer permits it (within the FP8
// bounds of tests/gpu/test_v3_fp8.cc against the float64 oracle), on v2 without the permission
// and where the FP8 kernel cannot serve the launch (pages of 16 and, at D 128, 64 keys), at the
// 16-bit tolerance.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/paged_attention.h"
#include "test_flash_attn_support.h"
#include "test_v3_support.h"

namespace pagedattn::test {
namespace {

constexpr double kFp8RelFrobenius = 0.045, kFp8MaxAbs = 0.25, kFp8MaxLse = 0.15;

testing::CaseSpec fp8_prefills(int head_size, int block_size) {
  testing::CaseSpec c;
  c.name = "fp8_tc_d" + std::to_string(head_size) + "_block" + std::to_string(block_size);
  c.seed = 7 + head_size + block_size;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_size = head_size;
  c.block_size = block_size;
  c.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  c.kv_scale_per_head = true;
  c.seq_lens = {700, 300, 129};
  c.query_lens = {700, 100, 129};
  return c;
}

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

std::vector<int> served_head_sizes() {
  std::vector<int> sizes;
  for (int d : {128, 256}) {
    if (kernels::paged_attention_head_size_built(d)) sizes.push_back(d);
  }
  return sizes;
}

TEST(Fp8TensorCores, PrefillsRunOnTheFp8TensorCoresWherePermitted) {
  PAGEDATTN_REQUIRE_V3();
  for (const std::string backend : {"FLASH_ATTN", "FLASHINFER"}) {
    for (int d : served_head_sizes()) {
      const testing::CaseSpec spec = fp8_prefills(d, 128);
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
      const testing::CaseSpec spec = fp8_prefills(128, block);
      const Fp8Run run = run_step(backend, spec, true);
      EXPECT_EQ(run.generation, "v2") << backend << " " << spec.name;
      EXPECT_TRUE(run.cmp.pass) << backend << " " << spec.name << ": " << run.cmp;
    }
  }
}

}  // namespace
}  // namespace pagedattn::test
