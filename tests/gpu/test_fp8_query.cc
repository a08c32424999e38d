// An fp8_e4m3 query through FLASH_ATTN's and FLASHINFER's forward (KVScales::q_scale, vLLM's FP8
// attention), against the same step over its dequantized values in bf16 (tests/support/
// fp8_step_query.h). Where the v3 FP8 kernel runs the step it reads the codes as they are: with
// scales that are powers of two its own rounding of a bf16 query to e4m3 is exact, so the outputs
// agree bit for bit, and no memory is taken for a dequantized copy; with other scales both stay
// within the FP8 kernel's bounds of the float64 oracle. Where another kernel runs a launch (no
// permission, pages the FP8 kernel cannot read, the decode kernel, an f16 model) the query is
// dequantized first and the outputs agree bit for bit.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "fp8_prefill_support.h"
#include "runtime/device_buffer.h"
#include "support/fp8_step_query.h"
#include "test_flash_attn_support.h"
#include "test_v3_support.h"

namespace pagedattn::test {
namespace {

using runtime::DeviceBuffer;

// Powers of two per request and KV head (the FP8 kernel's rounding of their products is exact).
float power_of_two_scale(int req, int kv_head) {
  return std::ldexp(1.0f, (req + kv_head) % 3 - 1);
}

DeviceBuffer upload(const void* host, size_t bytes) {
  StatusOr<DeviceBuffer> buf = DeviceBuffer::allocate(0, std::max<size_t>(bytes, 16));
  EXPECT_TRUE(buf.ok()) << buf.status().to_string();
  EXPECT_EQ(cudaMemcpy(buf->data(), host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  return std::move(*buf);
}

struct Outputs {
  std::vector<uint8_t> out, lse;
  std::string generation;
  size_t stream_ordered_bytes = 0;  // the default pool's high-water mark during the forward
  reference::Comparison cmp;
};

std::vector<uint8_t> bytes_of(const testing::HostTensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.view().data());
  return {p, p + t.view().nbytes()};
}

struct QueryRun {
  Outputs bf16;  // the step over the dequantized values
  Outputs e4m3;  // forward over the codes
};

// The step over the batch's (dequantized) query, then forward over the codes with q_scale: per
// request and KV head, or ([1]) where per_tensor the first of them (scale_of's one value).
QueryRun run_both(const std::string& backend_name, testing::CaseSpec spec, bool permitted,
                  const std::function<float(int, int)>& scale_of, bool per_tensor = false) {
  QueryRun result;
  const AttentionBackend* backend = find_backend(backend_name);
  EXPECT_NE(backend, nullptr) << backend_name;
  if (backend == nullptr) return result;
  StatusOr<testing::HostBatch> batch = testing::make_host_batch(spec, KVCacheLayout::kNHD);
  EXPECT_TRUE(batch.ok()) << batch.status().to_string();
  if (!batch.ok()) return result;
  batch->params.fp8_tensor_cores = permitted;
  const testing::Fp8StepQuery q = testing::quantize_step_query(*batch, scale_of);
  const KVCacheAllocation expected_cache = host_cache_after_write(*batch);
  testing::StepOptions options;
  options.builder_params = builder_params_for(*batch);
  StatusOr<std::unique_ptr<testing::StepRunner>> run =
      testing::StepRunner::for_batch(*batch, *backend, Device::cuda(0), options);
  EXPECT_TRUE(run.ok()) << run.status().to_string();
  if (!run.ok()) return result;
  testing::StepRunner& runner = **run;
  const auto record = [&](Outputs& o) {
    o.out = bytes_of(runner.output());
    o.lse = bytes_of(runner.lse());
    std::string_view generation = runner.kernel_generation();
    if (generation.starts_with("decode+")) generation.remove_prefix(7);
    o.generation = std::string(generation);
    o.cmp = compare_with_oracle(runner, expected_cache);
  };
  Status st = runner.run_step();
  EXPECT_TRUE(st.ok()) << spec.name << ": " << st.to_string();
  record(result.bf16);

  DeviceBuffer codes = upload(q.codes.data(), q.codes.size());
  const std::vector<float> one_scale = {q.scale[0]};
  const std::vector<float>& scales = per_tensor ? one_scale : q.scale;
  DeviceBuffer scale_buf = upload(scales.data(), scales.size() * sizeof(float));
  const testing::HostTensor& host_query = batch->query;
  const TensorView query(codes.data(), DType::kFP8E4M3, Device::cuda(0), host_query.view().shape());
  KVScales with_q = runner.placement().operands().scales;
  with_q.q_scale = per_tensor ? TensorView(scale_buf.data(), DType::kF32, Device::cuda(0), {1})
                              : TensorView(scale_buf.data(), DType::kF32, Device::cuda(0),
                                           {spec.num_reqs(), spec.num_kv_heads});
  cudaMemPool_t pool;
  EXPECT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  cuuint64_t zero = 0, high = 0;
  EXPECT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), cudaSuccess);
  EXPECT_TRUE(runner.placement().poison_outputs().ok());
  st = runner.execute(query, with_q);
  EXPECT_TRUE(st.ok()) << spec.name << " (e4m3 query): " << st.to_string();
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high), cudaSuccess);
  record(result.e4m3);
  result.e4m3.stream_ordered_bytes = static_cast<size_t>(high);
  std::printf("FP8Q %-10s %-24s %-9s %-3s rel_frob %.4g (bf16 query %.4g) dequantized bytes %zu\n",
              backend_name.c_str(), spec.name.c_str(), permitted ? "permitted" : "not",
              result.e4m3.generation.c_str(), result.e4m3.cmp.rel_frobenius,
              result.bf16.cmp.rel_frobenius, result.e4m3.stream_ordered_bytes);
  return result;
}

TEST(Fp8Query, TheFp8KernelReadsTheCodesAsTheyAre) {
  PAGEDATTN_REQUIRE_V3();
  for (const std::string backend : {"FLASH_ATTN", "FLASHINFER"}) {
    for (int d : fp8_kernel_head_sizes()) {
      for (const bool per_tensor : {false, true}) {
        const testing::CaseSpec spec = fp8_prefill_step("fp8_query", d, 128);
        const auto one_scale = [](int, int) { return 0.25f; };
        const QueryRun run = per_tensor ? run_both(backend, spec, true, one_scale, true)
                                        : run_both(backend, spec, true, power_of_two_scale);
        const std::string what = backend + " " + spec.name + (per_tensor ? " [1]" : " [reqs, Hkv]");
        EXPECT_EQ(run.e4m3.generation, "v3") << what;
        EXPECT_EQ(run.e4m3.stream_ordered_bytes, 0u) << what << ": the query was dequantized";
        EXPECT_TRUE(run.e4m3.out == run.bf16.out) << what;
        EXPECT_TRUE(run.e4m3.lse == run.bf16.lse) << what;
        EXPECT_LT(run.e4m3.cmp.rel_frobenius, kFp8RelFrobenius) << what;
      }
    }
  }
}

TEST(Fp8Query, AnyScaleStaysWithinTheFp8Bounds) {
  PAGEDATTN_REQUIRE_V3();
  const auto scale_of = [](int req, int kv_head) { return 0.0137f * (1 + req) + 0.21f * kv_head; };
  for (const std::string backend : {"FLASH_ATTN", "FLASHINFER"}) {
    for (int d : fp8_kernel_head_sizes()) {
      const testing::CaseSpec spec = fp8_prefill_step("fp8_query", d, 128);
      const QueryRun run = run_both(backend, spec, true, scale_of);
      EXPECT_EQ(run.e4m3.generation, "v3") << backend << " " << spec.name;
      EXPECT_EQ(run.e4m3.stream_ordered_bytes, 0u) << backend << " " << spec.name;
      EXPECT_LT(run.e4m3.cmp.rel_frobenius, kFp8RelFrobenius) << backend << " " << spec.name;
      EXPECT_LT(run.e4m3.cmp.max_abs_error, kFp8MaxAbs) << backend << " " << spec.name;
      EXPECT_LT(run.e4m3.cmp.max_lse_error, kFp8MaxLse) << backend << " " << spec.name;
    }
  }
}

TEST(Fp8Query, OtherKernelsReadItDequantized) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  struct Variant {
    std::string name;
    testing::CaseSpec spec;
    bool permitted;
  };
  std::vector<Variant> variants;
  variants.push_back({"not permitted", fp8_prefill_step("fp8_query", 128, 128), false});
  variants.push_back({"pages of 16", fp8_prefill_step("fp8_query", 128, 16), true});
  testing::CaseSpec mixed = fp8_prefill_step("fp8_query", 128, 128);
  mixed.seq_lens = {300, 517, 700, 129};
  mixed.query_lens = {1, 1, 1, 129};  // decodes first (FLASHINFER's order): the decode kernel's
  mixed.name += "_mixed";
  variants.push_back({"decodes", mixed, true});
  testing::CaseSpec f16 = fp8_prefill_step("fp8_query", 128, 128);
  f16.dtype = DType::kF16;
  f16.name += "_f16";
  variants.push_back({"f16 model", f16, true});
  for (const std::string backend : {"FLASH_ATTN", "FLASHINFER"}) {
    for (const Variant& v : variants) {
      const QueryRun run = run_both(backend, v.spec, v.permitted, power_of_two_scale);
      const std::string what = backend + " " + v.name;
      EXPECT_GT(run.e4m3.stream_ordered_bytes, 0u) << what << ": expected a dequantized query";
      EXPECT_TRUE(run.e4m3.out == run.bf16.out) << what;
      EXPECT_TRUE(run.e4m3.lse == run.bf16.lse) << what;
      EXPECT_LT(run.e4m3.cmp.rel_frobenius, kFp8RelFrobenius) << what;
    }
  }
}

}  // namespace
}  // namespace pagedattn::test
