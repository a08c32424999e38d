// Timing of the decode kernel family against the paged attention kernel (FLASH_ATTN's) on the
// same decode batches, and against a read of the same bytes. Run: pagedattn_gpu_bench
// --gtest_filter='DecodeBench.*'. Random inputs, shuffled block ids, medians of CUDA-event-timed
// launches; bandwidth counts the K/V bytes read.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda_test_support.h"
#include "decode_bench_timing.cuh"
#include "kernels/attention/paged_attention.h"
#include "pagedattn/device_info.h"
#include "plan/split_kv.h"

namespace pagedattn::test {
namespace {

using namespace decode_bench;

struct BenchShape {
  int num_reqs = 64, seq_len = 4096, hq = 32, hkv = 8, d = 128, block = 16;
  DType cache = DType::kBF16;
  bool hnd =
      false;  // cache layout [block][2][head][token][d] instead of [block][2][token][head][d]
  bool profile = false;  // one launch each of the default (TMA) and cp.async kernels (for ncu)
  bool shuffle = true;   // block ids shuffled (false: each request's blocks in order)
};

// The library's two tile configurations at D 128 launched directly on the library's plan: warp TMA
// tiles (tma, the default on compute capability 9) and cp.async tiles (cta, the fallback where TMA
// cannot describe the cache), interleaved and repeated (differences of 1-2 % need it).
// DECODE_BENCH_VARIANTS picks them by name prefix.
void time_config_variants(DType cache, const TimeDecode& t) {
  auto variants = [&t]<kernels::CacheKind kCache>() {
    for (int rep = 0; rep < 2; ++rep) {
      time_config<decode_ns::DecodeTmaConfig<128, kCache>>(t, "tma");
      time_config<decode_ns::DecodeCopyConfig<128, kCache>>(t, "cta");
    }
  };
  if (cache == DType::kFP8E4M3) {
    variants.template operator()<kernels::CacheKind::kFp8E4M3>();
  } else {
    variants.template operator()<kernels::CacheKind::kBF16>();
  }
}

void run_shape(const BenchShape& s) {
  const int blocks_per_req = (s.seq_len + s.block - 1) / s.block;
  const int64_t num_blocks = int64_t{s.num_reqs} * blocks_per_req;
  const int elem = static_cast<int>(dtype_size(s.cache));
  const int64_t cache_elems = num_blocks * 2 * s.block * s.hkv * s.d;
  const int64_t q_elems = int64_t{s.num_reqs} * s.hq * s.d;
  std::vector<int> table(num_blocks);
  std::iota(table.begin(), table.end(), 0);
  if (s.shuffle) std::shuffle(table.begin(), table.end(), std::mt19937(7));
  std::vector<int> cu(s.num_reqs + 1), seq(s.num_reqs, s.seq_len);
  for (int r = 0; r <= s.num_reqs; ++r) cu[r] = r;
  void *kv, *q, *out, *tbl, *cu_d, *seq_d, *scales, *lse;
  cudaMalloc(&kv, cache_elems * elem);
  cudaMalloc(&q, q_elems * 2);
  cudaMalloc(&out, q_elems * 2);
  cudaMalloc(&lse, int64_t{s.hq} * s.num_reqs * 4);
  cudaMalloc(&tbl, num_blocks * 4);
  cudaMalloc(&cu_d, (s.num_reqs + 1) * 4);
  cudaMalloc(&seq_d, s.num_reqs * 4);
  cudaMalloc(&scales, 8);
  const float one[2] = {0.5f, 0.5f};
  cudaMemcpy(scales, one, 8, cudaMemcpyHostToDevice);
  cudaMemcpy(tbl, table.data(), num_blocks * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(cu_d, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(seq_d, seq.data(), seq.size() * 4, cudaMemcpyHostToDevice);
  // bf16: exponent high bit cleared (|x| < 2); FP8 e4m3: top exponent bit cleared.
  const uint32_t mask = elem == 1 ? 0xB7B7B7B7u : 0xBFFFBFFFu;
  fill_random_bytes<<<1024, 256>>>(static_cast<uint32_t*>(kv), cache_elems * elem / 4, 1, mask);
  fill_random_bytes<<<1024, 256>>>(static_cast<uint32_t*>(q), q_elems / 2, 2, 0xBFFFBFFFu);
  const int64_t tok = int64_t{s.block} * s.hkv * s.d;  // K or V of one block
  const double kv_bytes = 2.0 * s.num_reqs * s.seq_len * s.hkv * s.d * elem;

  // Decode family: the library's launcher, then configuration and plan variants on the same data.
  const int sms = cuda_device(0)->num_sms;
  kernels::DecodeAttentionParams p;
  p.q = q;
  p.q_token_stride = int64_t{s.hq} * s.d;
  p.q_head_stride = s.d;
  p.k_cache = kv;
  p.v_cache = static_cast<char*>(kv) + tok * elem;
  p.cache_dtype = s.cache;
  p.cache_block_stride = 2 * tok;
  p.cache_token_stride = s.hnd ? s.d : int64_t{s.hkv} * s.d;
  p.cache_head_stride = s.hnd ? int64_t{s.block} * s.d : s.d;
  p.k_scale = p.v_scale = static_cast<float*>(scales);
  p.block_table = static_cast<int32_t*>(tbl);
  p.block_table_stride = blocks_per_req;
  p.num_heads = s.hq;
  p.num_kv_heads = s.hkv;
  p.head_size = s.d;
  p.block_size = s.block;
  p.scale = 0.088f;
  p.out = out;
  p.out_token_stride = int64_t{s.hq} * s.d;
  p.out_head_stride = s.d;
  p.lse = static_cast<float*>(lse);
  p.lse_head_stride = s.num_reqs;
  std::vector<void*> owned;
  // Plans for num_ctas CTAs with this unit overhead, then times `launch` on that grid.
  auto time_decode = [&](int num_ctas, const TimeOptions& opt,
                         const std::function<void(const kernels::DecodeAttentionParams&)>& launch,
                         plan::DecodePlanStats* stats_out) {
    plan::DecodePlanConfig config;
    config.num_ctas = num_ctas;
    config.num_heads = s.hq;
    config.num_kv_heads = s.hkv;
    config.unit_overhead_tokens = opt.overhead;
    const plan::DecodePlanLimits limits =
        plan::decode_plan_limits(config, s.num_reqs, s.num_reqs, s.seq_len);
    std::vector<int4> plan_host(static_cast<size_t>(limits.plan_bytes + 15) / 16);
    plan::DecodePlanScratch scratch;
    auto stats = plan::plan_decode(cu, seq, config, limits, scratch, plan_host.data());
    EXPECT_TRUE(stats.ok()) << stats.status().to_string();
    if (stats_out != nullptr && stats.ok()) *stats_out = *stats;
    void *plan_d, *part_out, *part_lse;
    cudaMalloc(&plan_d, limits.plan_bytes);
    cudaMemcpy(plan_d, plan_host.data(), limits.plan_bytes, cudaMemcpyHostToDevice);
    cudaMalloc(&part_out, std::max<int64_t>(1, limits.max_partial_rows) * s.d * 4);
    cudaMalloc(&part_lse, std::max<int64_t>(1, limits.max_partial_rows) * 4);
    owned.insert(owned.end(), {plan_d, part_out, part_lse});
    kernels::DecodeAttentionParams pp = p;
    pp.plan = plan_d;
    pp.partial_out = static_cast<float*>(part_out);
    pp.partial_lse = static_cast<float*>(part_lse);
    pp.num_ctas = config.num_ctas;
    const double ms = median_ms([&] { launch(pp); }, s.profile);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return ms;
  };
  plan::DecodePlanStats stats;
  const int lib_per_sm = kernels::decode_attention_ctas_per_sm(s.d, DType::kBF16, s.cache);
  auto library = [](const kernels::DecodeAttentionParams& pp) {
    (void)kernels::launch_decode_attention(pp, nullptr);
  };
  // Timed twice, the first discarded: the first timing after the cache's allocation and fill reads
  // slow (the clock settling).
  double decode_ms = 0.0;
  for (int pass = 0; pass < (s.profile ? 1 : 2); ++pass) {
    decode_ms = time_decode(sms * std::max(1, lib_per_sm), TimeOptions{}, library, &stats);
  }
  std::printf(
      "decode bench %dx%d hq %d hkv %d d %d block %d %s %s%s: decode %.4f ms (%.2f TB/s, %d "
      "units, %d merges, %d pool, %d ctas/SM, makespan %lld cost)\n",
      s.num_reqs, s.seq_len, s.hq, s.hkv, s.d, s.block, std::string(dtype_name(s.cache)).c_str(),
      s.hnd ? "HND" : "NHD", s.shuffle ? "" : " blocks-in-order", decode_ms,
      kv_bytes / decode_ms / 1e9, stats.num_units, stats.num_merges, stats.pool_units, lib_per_sm,
      static_cast<long long>(stats.max_cta_cost));
  std::fflush(stdout);
  if (s.profile) {
    time_config<decode_ns::DecodeCopyConfig<128, kernels::CacheKind::kBF16>>(time_decode, "cta");
    for (void* ptr : owned) cudaFree(ptr);
    for (void* ptr : {kv, q, out, lse, tbl, cu_d, seq_d, scales}) cudaFree(ptr);
    return;
  }
  if (s.d == 128) time_config_variants(s.cache, time_decode);

  // The paged attention kernel, split as the FLASH_ATTN builder would.
  kernels::PagedAttentionParams a;
  a.q = q;
  a.q_token_stride = p.q_token_stride;
  a.q_head_stride = s.d;
  a.k_cache = p.k_cache;
  a.v_cache = p.v_cache;
  a.cache_dtype = s.cache;
  a.cache_block_stride = p.cache_block_stride;
  a.cache_token_stride = p.cache_token_stride;
  a.cache_head_stride = p.cache_head_stride;
  a.k_scale = a.v_scale = static_cast<float*>(scales);
  a.cu_seqlens_q = static_cast<int32_t*>(cu_d);
  a.seqused_k = static_cast<int32_t*>(seq_d);
  a.block_table = p.block_table;
  a.block_table_stride = blocks_per_req;
  a.num_reqs = s.num_reqs;
  a.num_tokens = s.num_reqs;
  a.max_query_len = 1;
  a.max_seq_len = s.seq_len;
  a.num_heads = s.hq;
  a.num_kv_heads = s.hkv;
  a.head_size = s.d;
  a.block_size = s.block;
  a.scale = 0.088f;
  a.out = out;
  a.out_token_stride = p.out_token_stride;
  a.out_head_stride = s.d;
  a.lse = p.lse;
  a.lse_head_stride = s.num_reqs;
  plan::SplitKVConfig sc;
  sc.num_sms = sms;
  sc.num_heads = s.hq;
  sc.num_kv_heads = s.hkv;
  sc.block_size = s.block;
  auto splits = plan::plan_split_kv(cu, seq, sc);
  ASSERT_TRUE(splits.ok());
  a.max_num_splits = splits->max_splits_used;
  void *split_out = nullptr, *split_lse = nullptr, *nsplit = nullptr;
  if (a.max_num_splits > 1) {
    cudaMalloc(&split_out, int64_t{a.max_num_splits} * q_elems * 4);
    cudaMalloc(&split_lse, int64_t{a.max_num_splits} * s.hq * s.num_reqs * 4);
    cudaMalloc(&nsplit, s.num_reqs * 4);
    cudaMemcpy(nsplit, splits->num_splits_per_req.data(), s.num_reqs * 4, cudaMemcpyHostToDevice);
    a.split_out = static_cast<float*>(split_out);
    a.split_lse = static_cast<float*>(split_lse);
    a.num_splits_per_req = static_cast<int32_t*>(nsplit);
  }
  const double paged_ms = median_ms([&] { (void)kernels::launch_paged_attention(a, nullptr); });
  const double read_ms = time_read_probes(kv, static_cast<size_t>(cache_elems * elem),
                                          static_cast<uint32_t*>(out), kv_bytes);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::printf("  paged %.4f ms (%.2f TB/s, splits %d) | read (best probe) %.4f ms (%.2f TB/s)\n",
              paged_ms, kv_bytes / paged_ms / 1e9, a.max_num_splits, read_ms,
              kv_bytes / read_ms / 1e9);
  for (void* ptr : {kv, q, out, lse, tbl, cu_d, seq_d, scales, split_out, split_lse, nsplit}) {
    cudaFree(ptr);
  }
  for (void* ptr : owned) cudaFree(ptr);
}

// The peer suite's decode shapes (64 x 4096, 256 x 2048 and 8 x 32768 with 32/8 heads, 128 x 1024
// with 64/8, 32 x 8192 with 32/32; bf16, NHD), then the issue's shape with an FP8 e4m3 cache, at
// page 1024, HND and with its blocks in order, and few long requests.
std::vector<BenchShape> bench_shapes() {
  std::vector<BenchShape> shapes;
  for (const auto& [reqs, len, hq, hkv] : {std::tuple{64, 4096, 32, 8},
                                           {256, 2048, 32, 8},
                                           {8, 32768, 32, 8},
                                           {128, 1024, 64, 8},
                                           {32, 8192, 32, 32}}) {
    BenchShape s;
    s.num_reqs = reqs;
    s.seq_len = len;
    s.hq = hq;
    s.hkv = hkv;
    shapes.push_back(s);
  }
  BenchShape fp8;  // the issue's shape with an FP8 cache, and at page 1024
  fp8.cache = DType::kFP8E4M3;
  shapes.push_back(fp8);
  BenchShape page;
  page.block = 1024;
  shapes.push_back(page);
  BenchShape hnd;
  hnd.hnd = true;
  shapes.push_back(hnd);
  // The issue's shape with each request's blocks in order: what shuffled pages cost the copies.
  BenchShape in_order;
  in_order.shuffle = false;
  shapes.push_back(in_order);
  BenchShape small;  // few long requests: the plan must split
  small.num_reqs = 4;
  small.seq_len = 32768;
  shapes.push_back(small);
  return shapes;
}

TEST(DecodeBench, Shapes) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (const BenchShape& s : bench_shapes()) run_shape(s);
}

// One shape (the issue's, 64 x 4096 32/8 bf16 page 16 NHD, or DECODE_BENCH_PROFILE=
// "reqs,len,hq,hkv"), one launch of each of the default (TMA) and the cp.async kernel: for ncu.
TEST(DecodeBench, Profile) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  BenchShape s;
  s.profile = true;
  if (const char* env = std::getenv("DECODE_BENCH_PROFILE")) {
    ASSERT_EQ(std::sscanf(env, "%d,%d,%d,%d", &s.num_reqs, &s.seq_len, &s.hq, &s.hkv), 4) << env;
  }
  run_shape(s);
}

}  // namespace
}  // namespace pagedattn::test
