// An fp8_e4m3 query through CPU_ATTN's forward (KVScales::q_scale, vLLM's FP8 attention): read in
// the layer's dtype, so the output is the same step's over the dequantized values bit for bit
// (tests/support/fp8_step_query.h), whatever the scales, for bf16, f16 and f32 layers and 16-bit
// or FP8 caches; and the scale's checks, each an InvalidArgument naming q_scale.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pagedattn/selector.h"
#include "support/fp8_step_query.h"
#include "testing/step_runner.h"

namespace pagedattn::test {
namespace {

testing::CaseSpec mixed_step(DType dtype, KVCacheDType cache) {
  testing::CaseSpec c;
  c.name = "cpu_fp8_query";
  c.seed = 5;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.head_size = 64;
  c.block_size = 16;
  c.dtype = dtype;
  c.kv_cache_dtype = cache;
  c.seq_lens = {37, 90, 5};
  c.query_lens = {1, 33, 5};
  return c;
}

std::vector<uint8_t> bytes_of(const testing::HostTensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.view().data());
  return {p, p + t.view().nbytes()};
}

struct Step {
  testing::HostBatch batch;
  testing::Fp8StepQuery q;
  std::unique_ptr<testing::StepRunner> runner;
};

Step prepare(const testing::CaseSpec& spec) {
  StatusOr<testing::HostBatch> batch = testing::make_host_batch(spec, KVCacheLayout::kNHD);
  EXPECT_TRUE(batch.ok()) << batch.status().to_string();
  Step s{std::move(*batch), {}, nullptr};
  // Scales that are not powers of two: the dequantized values are rounded to the layer's dtype.
  s.q = testing::quantize_step_query(
      s.batch, [](int req, int kv_head) { return 0.0173f * (req + 1) + 0.3f * kv_head; });
  StatusOr<std::unique_ptr<testing::StepRunner>> runner =
      testing::StepRunner::for_batch(s.batch, *find_backend("CPU_ATTN"), Device::cpu());
  EXPECT_TRUE(runner.ok()) << runner.status().to_string();
  s.runner = std::move(*runner);
  return s;
}

TEST(CpuFp8Query, MatchesTheStepOverItsDequantizedValues) {
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (KVCacheDType cache : {KVCacheDType::kAuto, KVCacheDType::kFP8E4M3}) {
      Step s = prepare(mixed_step(dtype, cache));
      ASSERT_TRUE(s.runner->run_step().ok());
      const std::vector<uint8_t> out = bytes_of(s.runner->output());
      const std::vector<uint8_t> lse = bytes_of(s.runner->lse());
      const TensorView codes(s.q.codes.data(), DType::kFP8E4M3, Device::cpu(),
                             s.batch.query.view().shape());
      KVScales scales = s.batch.scales();
      scales.q_scale = TensorView(s.q.scale.data(), DType::kF32, Device::cpu(),
                                  {s.batch.spec.num_reqs(), s.batch.spec.num_kv_heads});
      testing::fill_nan(s.runner->output());
      const Status st = s.runner->execute(codes, scales);
      ASSERT_TRUE(st.ok()) << st.to_string();
      const std::string what =
          std::string(dtype_name(dtype)) + " " + std::string(kv_cache_dtype_name(cache));
      EXPECT_TRUE(bytes_of(s.runner->output()) == out) << what;
      EXPECT_TRUE(bytes_of(s.runner->lse()) == lse) << what;
    }
  }
}

TEST(CpuFp8Query, ScaleChecks) {
  Step s = prepare(mixed_step(DType::kBF16, KVCacheDType::kAuto));
  ASSERT_TRUE(s.runner->build().ok());
  const TensorView codes(s.q.codes.data(), DType::kFP8E4M3, Device::cpu(),
                         s.batch.query.view().shape());
  std::vector<float> values(16, 0.5f);
  const auto expect_refused = [&](const TensorView& query, const TensorView& q_scale,
                                  const std::string& why) {
    KVScales scales = s.batch.scales();
    scales.q_scale = q_scale;
    const Status st = s.runner->execute(query, scales);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << why << ": " << st.to_string();
    EXPECT_NE(st.message().find("q_scale"), std::string::npos) << why << ": " << st.to_string();
  };
  const TensorView per_tensor(values.data(), DType::kF32, Device::cpu(), {1});
  expect_refused(s.batch.query.view(), per_tensor, "beside a bf16 query");
  expect_refused(codes, TensorView(values.data(), DType::kF32, Device::cpu(), {2}), "[2]");
  expect_refused(codes, TensorView(values.data(), DType::kF32, Device::cpu(), {2, 2}),
                 "[2, Hkv] for 3 requests");
  expect_refused(codes, TensorView(values.data(), DType::kF16, Device::cpu(), {1}), "f16");
}

}  // namespace
}  // namespace pagedattn::test
