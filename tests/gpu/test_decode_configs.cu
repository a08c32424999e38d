// The decode kernel configurations DecodeBench times, against the float64 oracle, so that the one
// it finds fastest can become the default: the per-unit pipeline (the previous default) and tile
// streams of 2 or 3 stages and 2 to 8 warps. Each runs on 3 CTAs, so that every CTA streams many
// units, some shorter than its lookahead (DecodeKernel runs the default on the plan's grid).
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <string>

#include "cuda_test_support.h"
#include "kernels/decode/decode_combine.h"
#include "kernels/decode/decode_kernel.cuh"
#include "test_flashinfer_decode_harness.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

template <typename Cfg>
DecodeRunOptions config_options() {
  DecodeRunOptions o;
  o.ctas_per_sm = kernels::decode::decode_config_ctas_per_sm<Cfg, __nv_bfloat16>();
  o.launch = [](const kernels::DecodeAttentionParams& p) -> Status {
    const kernels::decode::DecodeArgs a = kernels::decode::make_decode_args(p);
    cudaError_t err = kernels::decode::launch_decode_config<Cfg, __nv_bfloat16>(a, nullptr);
    if (err == cudaSuccess) {
      err = kernels::decode::launch_decode_combine<__nv_bfloat16>(p, a.group, nullptr);
    }
    if (err != cudaSuccess) return Status(StatusCode::kCudaError, cudaGetErrorString(err));
    return ok_status();
  };
  return o;
}

template <typename Cfg>
void expect_config_passes(KVCacheDType kv, const std::string& name) {
  CaseSpec c;
  c.name = name;
  c.seed = 131;
  c.num_heads = 16;
  c.num_kv_heads = 2;
  c.block_size = 32;
  c.kv_cache_dtype = kv;
  c.sinks = true;
  c.sliding_window = SlidingWindow{3000, 0};
  c.seq_lens = {1, 17, 130, 777, 2000, 65, 4099};
  c.query_lens = {1, 1, 2, 1, 1, 3, 1};
  for (KVCacheLayout layout : {KVCacheLayout::kNHD, KVCacheLayout::kHND}) {
    DecodeRunOptions o = config_options<Cfg>();
    o.num_ctas = 3;
    const DecodeRunResult r = run_decode_case(c, layout, o);
    EXPECT_TRUE(r.cmp.pass) << name << ": max_abs " << r.cmp.max_abs_error << "\n" << r.cmp.detail;
  }
}

// D 128, bf16 queries, an e4m3 or bf16 cache.
template <kernels::CacheKind kCache, int kBlockN, int kStages, bool kStream, int kWarps = 4,
          kernels::decode::TileSync kSync = kernels::decode::TileSync::kCta>
void expect_passes() {
  using Cfg =
      kernels::decode::DecodeConfig<128, kCache, kBlockN, kStages, kStream, kWarps, kSync>;
  constexpr bool kFp8 = kCache == kernels::CacheKind::kFp8E4M3;
  expect_config_passes<Cfg>(kFp8 ? KVCacheDType::kFP8E4M3 : KVCacheDType::kAuto,
                            std::string(kFp8 ? "fp8_" : "bf16_") + (kStream ? "stream" : "unit") +
                                std::to_string(kBlockN) + "w" + std::to_string(kWarps) + "x" +
                                std::to_string(kStages) + (Cfg::kWarpSync ? "_warpsync" : ""));
}

constexpr auto kE4M3 = kernels::CacheKind::kFp8E4M3;
constexpr auto kBF16 = kernels::CacheKind::kBF16;
constexpr auto kWarpSync = kernels::decode::TileSync::kWarp;

// The previous default (per-unit pipelines); the default itself runs in DecodeKernel.
TEST(DecodeConfigs, PerUnitPipelines) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  expect_passes<kE4M3, 128, 3, false>();
  expect_passes<kBF16, 64, 3, false>();
}

TEST(DecodeConfigs, Fp8Streams) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  expect_passes<kE4M3, 128, 2, true>();
  expect_passes<kE4M3, 64, 3, true, 2>();
}

TEST(DecodeConfigs, Bf16Streams) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  expect_passes<kBF16, 64, 2, true>();
  expect_passes<kBF16, 32, 3, true, 2>();
  expect_passes<kBF16, 128, 3, true, 8>();
}

// Warp-synchronised tiles: each warp copies and waits for its own keys only.
TEST(DecodeConfigs, WarpSyncStreams) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  expect_passes<kBF16, 64, 3, true, 4, kWarpSync>();
  expect_passes<kBF16, 128, 3, true, 8, kWarpSync>();
  expect_passes<kBF16, 32, 3, true, 2, kWarpSync>();
  expect_passes<kE4M3, 128, 3, true, 4, kWarpSync>();
}

}  // namespace
}  // namespace pagedattn::test
