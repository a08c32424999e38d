// CPU_ATTN's decode kernel (single query rows) vs the float64 oracle on every SIMD target: head
// sizes whose pairs of vectors do not fill the widest vectors (40, 48, 80, 104: narrower vectors),
// contexts that end inside a softmax tile and inside a group of scored keys, GQA groups that do not
// fill a block of query vectors, and every cache dtype with per-head scales.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cpu/simd_target.h"
#include "testing/host_batch.h"
#include "unit/cpu_oracle_cases.h"

namespace pagedattn::cpu_test {
namespace {

using testing::CaseSpec;

std::vector<CaseSpec> decode_cases() {
  const int head_sizes[] = {40, 48, 80, 104, 128};
  const int groups[] = {1, 3, 4, 6};
  const KVCacheDType caches[] = {KVCacheDType::kAuto, KVCacheDType::kFP8E4M3,
                                 KVCacheDType::kFP8E5M2};
  const DType dtypes[] = {DType::kBF16, DType::kF16, DType::kF32};
  std::vector<CaseSpec> cases;
  for (int k = 0; k < 20; ++k) {
    CaseSpec s;
    s.seed = 3700 + k;
    s.head_size = head_sizes[k % 5];
    s.num_kv_heads = 1 + k % 3;
    s.num_heads = groups[k % 4] * s.num_kv_heads;
    s.block_size = k % 2 == 0 ? 16 : 5;
    s.dtype = dtypes[k % 3];
    s.kv_cache_dtype = caches[(k / 3) % 3];
    s.kv_scale_per_head = k % 2 == 1;
    s.sinks = k % 4 == 3;
    s.seq_lens = {1, 63, 64, 130, 203};  // one key; tile edges; a partial group of keys
    s.query_lens = {1, 1, 1, 1, 1};
    s.name = "decode_" + std::to_string(k);
    cases.push_back(s);
  }
  return cases;
}

class CpuDecodeKernel : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuDecodeKernel, MatchesOracle) {
  ASSERT_TRUE(cpu::force_simd_target(GetParam()).ok());
  expect_cases_match_oracle(decode_cases(), GetParam());
  ASSERT_TRUE(cpu::force_simd_target("best").ok());
}

INSTANTIATE_TEST_SUITE_P(Simd, CpuDecodeKernel, ::testing::ValuesIn(cpu::simd_targets_available()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace pagedattn::cpu_test
