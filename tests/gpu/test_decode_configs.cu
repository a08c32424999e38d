// The decode kernel's two tile configurations against the float64 oracle, each launched directly:
// cp.async tiles with a block barrier per tile (cta, the fallback where TMA cannot describe the
// cache) and warp TMA tiles (tma, the default on compute capability 9). Each runs on 3 CTAs, so
// that every CTA streams many units, some shorter than its lookahead (DecodeKernel runs the
// library's launch on the plan's grid).
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "cuda_test_support.h"
#include "kernels/decode/kernel.cuh"
#include "test_flashinfer_decode_harness.h"

namespace pagedattn::test {
namespace {

using kernels::decode::TileSync;
using testing::CaseSpec;

// The configuration Cfg launched directly (its CTAs merge the split segments).
template <typename Cfg>
DecodeRunOptions config_options() {
  DecodeRunOptions o;
  o.ctas_per_sm = kernels::decode::decode_config_ctas_per_sm<Cfg, __nv_bfloat16>();
  o.launch = [](const kernels::DecodeAttentionParams& p) -> Status {
    const kernels::decode::DecodeArgs a = kernels::decode::make_decode_args(p);
    const cudaError_t err = kernels::decode::launch_decode_config<Cfg, __nv_bfloat16>(a, nullptr);
    if (err != cudaSuccess) return Status(StatusCode::kCudaError, cudaGetErrorString(err));
    return ok_status();
  };
  return o;
}

// Odd lengths (cut units start and end inside pages and tiles), a sink, a window at page 32;
// pages 16 and 1024 without the window. Both layouts.
template <typename Cfg>
void expect_config_passes(KVCacheDType kv, const std::string& name,
                          std::initializer_list<int> blocks) {
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
  for (int block : blocks) {
    c.block_size = block;
    if (block != 32) c.sliding_window = SlidingWindow{};
    for (KVCacheLayout layout : {KVCacheLayout::kNHD, KVCacheLayout::kHND}) {
      DecodeRunOptions o = config_options<Cfg>();
      o.num_ctas = 3;
      const DecodeRunResult r = run_decode_case(c, layout, o);
      EXPECT_TRUE(r.cmp.pass) << name << " block " << block << " "
                              << (layout == KVCacheLayout::kNHD ? "NHD" : "HND") << ": max_abs "
                              << r.cmp.max_abs_error << "\n"
                              << r.cmp.detail;
      EXPECT_GT(r.stats.num_merges, 0) << name;
    }
  }
}

// D 128, bf16 queries, an e4m3 or bf16 cache.
template <kernels::CacheKind kCache, int kBlockN, int kStages, int kWarps = 4,
          TileSync kSync = TileSync::kCta>
void expect_passes(std::initializer_list<int> blocks = {32}) {
  using Cfg = kernels::decode::DecodeConfig<128, kCache, kBlockN, kStages, kWarps, kSync>;
  constexpr bool kFp8 = kCache == kernels::CacheKind::kFp8E4M3;
  const char* sync = kSync == TileSync::kCta ? "cta" : "tma";
  expect_config_passes<Cfg>(kFp8 ? KVCacheDType::kFP8E4M3 : KVCacheDType::kAuto,
                            std::string(kFp8 ? "fp8_" : "bf16_") + sync + std::to_string(kBlockN) +
                                "w" + std::to_string(kWarps) + "x" + std::to_string(kStages),
                            blocks);
}

int device_major() {
  const StatusOr<const CudaDeviceInfo*> device = runtime::current_cuda_device();
  return device.ok() ? (*device)->capability.major : 0;
}

constexpr auto kE4M3 = kernels::CacheKind::kFp8E4M3;
constexpr auto kBF16 = kernels::CacheKind::kBF16;

// The cp.async tiles (the fallback where TMA cannot serve) and the TMA tiles (the default):
// boxes of 16 keys (one page each) swizzled, foreign V rows zeroed.
TEST(DecodeConfigs, CopyTiles) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  expect_passes<kBF16, 64, 3>();
  expect_passes<kE4M3, 128, 3>();
}

TEST(DecodeConfigs, TmaTiles) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const int major = device_major();
  if (major != 9)
    GTEST_SKIP() << "TMA tiles need compute capability 9 (this device: " << major << ")";
  expect_passes<kBF16, 64, 3, 4, TileSync::kWarpTma>({32, 16, 1024});
  expect_passes<kE4M3, 128, 3, 4, TileSync::kWarpTma>({32, 16, 1024});
}

}  // namespace
}  // namespace pagedattn::test
