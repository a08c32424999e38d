// The decode kernel on bf16 dot products (bf16 queries on bf16 and FP8 caches, head sizes that are
// multiples of 32 for bf16 and 64 for FP8) vs the float64 oracle, on every SIMD target (AVX3_DL
// runs it where the CPU has AVX512_BF16, the others run the float kernel on the same cases): GQA
// groups 1-8, windows, sinks, per-head scales, blocks of 5 and 16, contexts that end inside a
// softmax tile, a group of scored keys and a pair of values; and NaN in a query, a cached key or a
// cached value reaching exactly the outputs that see it.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/simd_target.h"
#include "testing/host_batch.h"
#include "unit/cpu_oracle_cases.h"

namespace pagedattn::cpu_test {
namespace {

using testing::CaseSpec;

constexpr KVCacheDType kCaches[] = {KVCacheDType::kAuto, KVCacheDType::kFP8E4M3,
                                    KVCacheDType::kFP8E5M2};

std::vector<CaseSpec> bf16_dot_cases() {
  const int head_sizes[] = {64, 96, 128, 256};
  const int groups[] = {1, 2, 3, 4, 5, 8};
  std::vector<CaseSpec> cases;
  for (int c = 0; c < 3; ++c) {
    for (int h = 0; h < 4; ++h) {
      const int k = 4 * c + h;
      CaseSpec s;
      s.seed = 3800 + k;
      s.dtype = DType::kBF16;
      s.kv_cache_dtype = kCaches[c];
      s.head_size = head_sizes[h];
      s.num_kv_heads = 1 + k % 2;
      s.num_heads = groups[k % 6] * s.num_kv_heads;
      s.block_size = k % 2 == 0 ? 16 : 5;
      s.kv_scale_per_head = k % 2 == 1;
      s.sinks = k % 4 == 3;
      if (k % 3 == 1) s.sliding_window = SlidingWindow{45, -1};
      s.seq_lens = {1, 2, 63, 64, 131, 203};
      s.query_lens = {1, 1, 1, 1, 1, 1};
      s.name = "bf16_dot_" + std::to_string(k);
      cases.push_back(s);
    }
  }
  return cases;
}

class CpuBf16DotDecode : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_TRUE(cpu::force_simd_target(GetParam()).ok()); }
  void TearDown() override { ASSERT_TRUE(cpu::force_simd_target("best").ok()); }
};

TEST_P(CpuBf16DotDecode, MatchesOracle) {
  expect_cases_match_oracle(bf16_dot_cases(), GetParam());
}

// One request decoding over 40 keys, 8 query heads on 2 KV heads, head size 128.
constexpr int kHeads = 8, kKvHeads = 2, kDim = 128;

CaseSpec nan_case(KVCacheDType cache) {
  CaseSpec s;
  s.name = "bf16_dot_nan";
  s.seed = 78;
  s.dtype = DType::kBF16;
  s.kv_cache_dtype = cache;
  s.num_heads = kHeads;
  s.num_kv_heads = kKvHeads;
  s.head_size = kDim;
  s.seq_lens = {40};
  s.query_lens = {1};
  return s;
}

bool bf16_is_nan(uint16_t x) {
  return (x & 0x7F80) == 0x7F80 && (x & 0x7F) != 0;
}

// How many elements of the output row of `head` are NaN.
int nan_count(const RunResult& r, int head) {
  const TensorView out = r.output.view();
  const uint16_t* row = static_cast<const uint16_t*>(out.data()) + head * out.stride(1);
  int nans = 0;
  for (int d = 0; d < kDim; ++d) nans += bf16_is_nan(row[d]) ? 1 : 0;
  return nans;
}

// Element `d` of the cached row of context key 5 (block_table[0][0], offset 5), KV head 1, of
// plane 0 (keys) or 1 (values) set to the cache dtype's NaN.
void cached_nan(testing::HostBatch& batch, int plane, int d) {
  const TensorView& cache = batch.kv_cache.view();
  const int32_t block = batch.block_table.data<int32_t>()[0];
  const int64_t at = block * cache.stride(0) + plane * cache.stride(1) + 5 * cache.stride(2) +
                     1 * cache.stride(3) + d;
  if (cache.dtype() == DType::kBF16) {
    static_cast<uint16_t*>(cache.data())[at] = 0x7FC0;
  } else {
    static_cast<uint8_t*>(cache.data())[at] = 0x7F;  // NaN in e4m3 and e5m2
  }
}

// Runs the case for every cache dtype after `poison` and checks nan_count of every head.
template <class Poison, class Expected>
void expect_nans(const Poison& poison, const Expected& expected) {
  for (const KVCacheDType cache : kCaches) {
    auto batch = testing::make_host_batch(nan_case(cache), KVCacheLayout::kNHD);
    ASSERT_TRUE(batch.ok()) << batch.status().to_string();
    poison(*batch);
    auto result = run_against_reference(*batch);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    for (int h = 0; h < kHeads; ++h) {
      EXPECT_EQ(nan_count(*result, h), expected(h)) << kv_cache_dtype_name(cache) << " head " << h;
    }
  }
}

TEST_P(CpuBf16DotDecode, NaNInTheQueryReachesItsRow) {
  expect_nans(
      [](testing::HostBatch& b) {
        static_cast<uint16_t*>(b.query.view().data())[3 * b.query.view().stride(1) + 9] = 0x7FC0;
      },
      [](int h) { return h == 3 ? kDim : 0; });
}

TEST_P(CpuBf16DotDecode, NaNInACachedKeyReachesTheRowsOfItsKvHead) {
  expect_nans([](testing::HostBatch& b) { cached_nan(b, 0, 70); },
              [](int h) { return h >= kHeads / kKvHeads ? kDim : 0; });
}

TEST_P(CpuBf16DotDecode, NaNInACachedValueReachesItsElement) {
  expect_nans([](testing::HostBatch& b) { cached_nan(b, 1, 101); },
              [](int h) { return h >= kHeads / kKvHeads ? 1 : 0; });
}

INSTANTIATE_TEST_SUITE_P(Simd, CpuBf16DotDecode, ::testing::ValuesIn(cpu::simd_targets_available()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace pagedattn::cpu_test
