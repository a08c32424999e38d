// CPU_ATTN forward vs the float64 oracle over a sampled grid: head sizes, GQA groups, block sizes,
// layouts, query dtypes, and every feature of semantics.md alone and combined, FP8 caches included.
#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "backends/cpu/simd_target.h"
#include "support/cpu_run.h"
#include "testing/host_batch.h"

namespace pagedattn::cpu_test {
namespace {

using testing::CaseSpec;

struct GridCase {
  std::string name;
  CaseSpec spec;
  KVCacheLayout layout = KVCacheLayout::kNHD;
  AttentionType attn_type = AttentionType::kDecoder;
};

struct Feature {
  const char* name;
  std::function<void(CaseSpec&)> apply;
};

std::vector<Feature> features() {
  auto fp8 = [](KVCacheDType kv, bool per_head) {
    return [=](CaseSpec& s) {
      s.kv_cache_dtype = kv;
      s.kv_scale_per_head = per_head;
    };
  };
  return {
      {"plain", [](CaseSpec&) {}},
      {"noncausal", [](CaseSpec& s) { s.causal = false; }},
      {"window_decoder",
       [](CaseSpec& s) {
         s.sliding_window = SlidingWindow{7, 0};
       }},
      {"window_encoder",
       [](CaseSpec& s) {
         s.causal = false;
         s.sliding_window = SlidingWindow{5, 5};
       }},
      {"window_left_only",
       [](CaseSpec& s) {
         s.causal = false;
         s.sliding_window = SlidingWindow{9, -1};
       }},
      {"window_right_only",
       [](CaseSpec& s) {
         s.causal = false;
         s.sliding_window = SlidingWindow{-1, 3};
       }},
      {"alibi", [](CaseSpec& s) { s.alibi = true; }},
      {"softcap",
       [](CaseSpec& s) {
         s.scale = 0.5;
         s.logits_soft_cap = 3.0;
       }},
      {"sinks", [](CaseSpec& s) { s.sinks = true; }},
      {"alibi_softcap_sinks",
       [](CaseSpec& s) {
         s.alibi = true;
         s.logits_soft_cap = 4.0;
         s.sinks = true;
       }},
      {"all_features",
       [](CaseSpec& s) {
         s.alibi = true;
         s.logits_soft_cap = 4.0;
         s.sinks = true;
         s.sliding_window = SlidingWindow{11, 0};
       }},
      {"fp8_e4m3_tensor", fp8(KVCacheDType::kFP8E4M3, false)},
      {"fp8_e4m3_head", fp8(KVCacheDType::kFP8E4M3, true)},
      {"fp8_e5m2_tensor", fp8(KVCacheDType::kFP8E5M2, false)},
      {"fp8_e5m2_head", fp8(KVCacheDType::kFP8E5M2, true)},
      {"fp8_all_features",
       [](CaseSpec& s) {
         s.kv_cache_dtype = KVCacheDType::kFP8E5M2;
         s.kv_scale_per_head = true;
         s.sinks = true;
         s.alibi = true;
         s.sliding_window = SlidingWindow{20, 0};
       }},
  };
}

// Batch shapes: a vLLM-style mix (decode, prefill, extend, a padding request, decode), decodes over
// a longer context, and chunked prefills.
void set_batch(CaseSpec& s, int which) {
  switch (which % 3) {
    case 0:
      s.seq_lens = {45, 17, 70, 9, 33};
      s.query_lens = {1, 17, 6, 0, 1};
      break;
    case 1:
      s.seq_lens = {300, 41, 1};
      s.query_lens = {1, 1, 1};
      break;
    default:
      s.seq_lens = {90, 130};
      s.query_lens = {30, 3};
      break;
  }
}

std::vector<GridCase> grid() {
  const int head_sizes[] = {32, 64, 80, 96, 128, 192, 256, 512};
  const int groups[] = {1, 4, 7, 8};
  const int block_sizes[] = {1, 16, 32, 256};
  const DType dtypes[] = {DType::kF32, DType::kF16, DType::kBF16};
  std::vector<GridCase> cases;
  int k = 0;
  for (const Feature& feature : features()) {
    for (int variant = 0; variant < 3; ++variant, ++k) {
      GridCase c;
      CaseSpec& s = c.spec;
      s.seed = 1000 + k;
      s.head_size = head_sizes[k % 8];
      const int group = groups[(k + k / 8) % 4];
      s.num_kv_heads = group >= 7 ? 1 + k % 2 : 2;
      s.num_heads = group * s.num_kv_heads;
      s.block_size = block_sizes[(k + k / 4) % 4];
      s.dtype = dtypes[k % 3];
      c.layout = (k + k / 2) % 2 == 0 ? KVCacheLayout::kNHD : KVCacheLayout::kHND;
      set_batch(s, variant);
      feature.apply(s);
      c.name = std::string(feature.name) + "_" + std::to_string(variant) + "_d" +
               std::to_string(s.head_size) + "_g" + std::to_string(group) + "_bs" +
               std::to_string(s.block_size) + "_" + std::string(dtype_name(s.dtype)) + "_" +
               std::string(kv_cache_layout_name(c.layout));
      s.name = c.name;
      cases.push_back(c);
    }
  }
  return cases;
}

void PrintTo(const GridCase& c, std::ostream* os) {
  *os << c.name;
}

class CpuAttentionGrid : public ::testing::TestWithParam<GridCase> {};

TEST_P(CpuAttentionGrid, MatchesOracle) {
  const GridCase& c = GetParam();
  auto batch = testing::make_host_batch(c.spec, c.layout);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  RunOptions options;
  options.attn_type = c.attn_type;
  auto result = run_against_reference(*batch, options);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_TRUE(result->comparison.pass) << result->comparison.detail;
}

// Every SIMD target this machine has (the best one runs the whole grid above) on a sample of the
// grid.
class CpuAttentionTargets : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuAttentionTargets, MatchesOracle) {
  ASSERT_TRUE(cpu::force_simd_target(GetParam()).ok());
  const std::vector<GridCase> cases = grid();
  for (size_t i = 0; i < cases.size(); i += 5) {
    const GridCase& c = cases[i];
    auto batch = testing::make_host_batch(c.spec, c.layout);
    ASSERT_TRUE(batch.ok()) << batch.status().to_string();
    auto result = run_against_reference(*batch);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_TRUE(result->comparison.pass) << GetParam() << " " << c.name << "\n"
                                         << result->comparison.detail;
  }
  ASSERT_TRUE(cpu::force_simd_target("best").ok());
}

INSTANTIATE_TEST_SUITE_P(Simd, CpuAttentionTargets,
                         ::testing::ValuesIn(cpu::simd_targets_available()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

INSTANTIATE_TEST_SUITE_P(Grid, CpuAttentionGrid, ::testing::ValuesIn(grid()),
                         [](const ::testing::TestParamInfo<GridCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace pagedattn::cpu_test
