// The GQA-packed decode kernel family against the float64 oracle: layouts, dtypes, GQA groups,
// speculative-verify query lengths, page sizes up to 1024, every decode feature, FP8 caches in
// both formats with both scale kinds, forced splits and the combine, deterministic mode.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "test_flashinfer_decode_harness.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

// Odd lengths, a sequence of length 1 and one long enough to be split.
CaseSpec decode_case(uint64_t seed, int q_len = 1) {
  CaseSpec c;
  c.name = "decode";
  c.seed = seed;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_size = 128;
  c.block_size = 16;
  c.seq_lens = {1, 17, 130, 777, 2000, 65, 33, 4099};
  for (int& s : c.seq_lens) s = std::max(s, q_len);
  c.query_lens.assign(c.seq_lens.size(), q_len);
  return c;
}

void expect_pass(const CaseSpec& c, KVCacheLayout layout, const DecodeRunOptions& o = {}) {
  const DecodeRunResult r = run_decode_case(c, layout, o);
  EXPECT_TRUE(r.cmp.pass) << c.name << " (units " << r.stats.num_units << ", merges "
                          << r.stats.num_merges << "): " << r.cmp;
}

TEST(DecodeKernel, LayoutsAndDtypes) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (KVCacheLayout layout : {KVCacheLayout::kNHD, KVCacheLayout::kHND}) {
      CaseSpec c = decode_case(11);
      c.dtype = dt;
      c.name = std::string("decode_") + std::string(dtype_name(dt));
      expect_pass(c, layout);
    }
  }
}

TEST(DecodeKernel, GqaGroups) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (int group : {1, 4, 7, 8, 16, 64}) {
    CaseSpec c = decode_case(20 + group);
    c.num_kv_heads = 2;
    c.num_heads = 2 * group;
    c.name = "gqa_" + std::to_string(group);
    expect_pass(c, KVCacheLayout::kNHD);
  }
}

TEST(DecodeKernel, SpeculativeVerifyQueryLengths) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (int q_len : {2, 3, 8}) {
    for (int group : {4, 8}) {
      CaseSpec c = decode_case(40 + q_len, q_len);
      c.num_heads = 2 * group;
      c.name = "spec_q" + std::to_string(q_len) + "_g" + std::to_string(group);
      expect_pass(c, q_len == 3 ? KVCacheLayout::kHND : KVCacheLayout::kNHD);
    }
  }
}

TEST(DecodeKernel, PageSizes) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (int bs : {16, 32, 64, 256, 1024}) {
    for (KVCacheLayout layout : {KVCacheLayout::kNHD, KVCacheLayout::kHND}) {
      CaseSpec c = decode_case(50 + bs);
      c.block_size = bs;
      c.name = "page_" + std::to_string(bs);
      expect_pass(c, layout);
    }
  }
}

TEST(DecodeKernel, Features) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (const SlidingWindow& w : {SlidingWindow{15, 0}, SlidingWindow{63, 0}, SlidingWindow{0, 0},
                                 SlidingWindow{300, 0}}) {
    CaseSpec c = decode_case(60 + w.left);
    c.sliding_window = w;
    c.name = "window_" + std::to_string(w.left);
    expect_pass(c, KVCacheLayout::kNHD);
    for (int& s : c.seq_lens) s = std::max(s, 4);
    c.query_lens.assign(c.seq_lens.size(), 4);
    c.name += "_q4";
    expect_pass(c, KVCacheLayout::kHND);
  }
  for (int mask = 1; mask < 8; ++mask) {
    CaseSpec c = decode_case(70 + mask);
    c.logits_soft_cap = (mask & 1) ? 30.0 : 0.0;
    c.alibi = mask & 2;
    c.sinks = mask & 4;
    c.name = "features_" + std::to_string(mask);
    expect_pass(c, KVCacheLayout::kNHD);
  }
  CaseSpec c = decode_case(79, 2);
  c.alibi = true;
  c.sinks = true;
  c.logits_soft_cap = 20.0;
  c.sliding_window = SlidingWindow{100, 0};
  c.name = "features_all_q2";
  expect_pass(c, KVCacheLayout::kHND);
}

TEST(DecodeKernel, Fp8Caches) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (KVCacheDType kv : {KVCacheDType::kFP8E4M3, KVCacheDType::kFP8E5M2}) {
    for (bool per_head : {false, true}) {
      for (DType dt : {DType::kBF16, DType::kF16}) {
        CaseSpec c = decode_case(80 + per_head);
        c.kv_cache_dtype = kv;
        c.kv_scale_per_head = per_head;
        c.dtype = dt;
        c.name = std::string(kv_cache_dtype_name(kv)) + (per_head ? "_head_" : "_tensor_") +
                 std::string(dtype_name(dt));
        expect_pass(c, per_head ? KVCacheLayout::kHND : KVCacheLayout::kNHD);
      }
    }
    CaseSpec c = decode_case(85, 4);
    c.kv_cache_dtype = kv;
    c.head_size = 72;  // 8-byte FP8 row copies, zero-filled columns
    c.sinks = true;
    c.sliding_window = SlidingWindow{200, 0};
    c.name = std::string(kv_cache_dtype_name(kv)) + "_d72_q4";
    if (kernels::decode_attention_kernel_head_size(72) != 0) {
      expect_pass(c, KVCacheLayout::kNHD);
      // 72-byte token rows: no tensor map, so the TMA tiles fall back to cp.async.
      expect_pass(c, KVCacheLayout::kHND);
    }
  }
}

TEST(DecodeKernel, HeadSizes) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (int d : {32, 64, 72, 80, 96, 104, 128, 136, 192, 200, 256}) {
    if (kernels::decode_attention_kernel_head_size(d) == 0) continue;
    for (KVCacheDType kv : {KVCacheDType::kAuto, KVCacheDType::kFP8E4M3}) {
      CaseSpec c = decode_case(90 + d);
      c.head_size = d;
      c.kv_cache_dtype = kv;
      c.name = "head_" + std::to_string(d) + "_" + std::string(kv_cache_dtype_name(kv));
      expect_pass(c, KVCacheLayout::kNHD);
    }
  }
}

// Many CTAs with no overhead cut every long segment (merges); one CTA runs every unit in turn.
// Each plan runs twice (as in two layers): the second launch's merges need the counts the first
// left at 0.
TEST(DecodeKernel, SplitsAndCombine) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (int ctas : {1, 3, 1000}) {
    for (KVCacheDType kv : {KVCacheDType::kAuto, KVCacheDType::kFP8E5M2}) {
      CaseSpec c = decode_case(100 + ctas, ctas == 3 ? 2 : 1);
      c.kv_cache_dtype = kv;
      c.sinks = true;
      c.name = "ctas_" + std::to_string(ctas) + "_" + std::string(kv_cache_dtype_name(kv));
      DecodeRunOptions o;
      o.num_ctas = ctas;
      o.unit_overhead_tokens = 0;
      o.launches = 2;
      const DecodeRunResult r = run_decode_case(c, KVCacheLayout::kNHD, o);
      EXPECT_TRUE(r.cmp.pass) << c.name << ": " << r.cmp.detail;
      if (ctas == 1000) {
        EXPECT_GT(r.stats.num_merges, 0) << c.name;
      }
    }
  }
}

// The shared pool: on 2 CTAs every segment whole in the pool (each CTA takes many pool units in
// turn), on the device's grid the balanced plan with cuts; every plan launched three times (the
// pool's counters must be back at 0 after each launch).
TEST(DecodeKernel, SharedPoolOfUnits) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (int ctas : {2, 0}) {
    CaseSpec c = decode_case(130);
    c.sinks = true;
    c.name = "pool_ctas_" + std::to_string(ctas);
    const DecodeRunResult r = run_pool_case(c, {}, ctas);
    if (ctas == 0) {
      EXPECT_EQ(r.stats.pool_units, 0) << c.name;  // cuts: one CTA per 128 keys or so
    } else {
      EXPECT_EQ(r.stats.pool_units, r.stats.num_units) << c.name;
    }
  }
}

// Many short requests: every segment whole in the pool (no cuts, no merges), taken by 2 and 7
// CTAs in turn, odd lengths from 1 key, a sink, three launches of the plan.
TEST(DecodeKernel, WholeSegmentPool) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec c = decode_case(140);
  c.sinks = true;
  c.seq_lens.clear();
  for (int r = 0; r < 300; ++r) c.seq_lens.push_back(1 + (r * 37) % 150);
  c.query_lens.assign(c.seq_lens.size(), 1);
  for (int ctas : {2, 7}) {
    c.name = "whole_pool_ctas_" + std::to_string(ctas);
    DecodeRunOptions o;
    o.num_ctas = ctas;
    o.launches = 3;
    const DecodeRunResult r = run_decode_case(c, KVCacheLayout::kHND, o);
    EXPECT_TRUE(r.cmp.pass) << c.name << ": max_abs " << r.cmp.max_abs_error << "\n"
                            << r.cmp.detail;
    EXPECT_EQ(r.stats.pool_units, r.stats.num_units) << c.name;
    EXPECT_EQ(r.stats.num_merges, 0) << c.name;
  }
}

// Fixed chunks: the output bits do not depend on how the units are spread over CTAs.
TEST(DecodeKernel, DeterministicModeIsBitIdentical) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec c = decode_case(120);
  c.sinks = true;
  DecodeRunOptions o;
  o.fixed_chunk_tokens = 512;
  o.launches = 2;
  std::vector<uint16_t> first;
  for (int ctas : {1, 7, 264, 999}) {
    o.num_ctas = ctas;
    const DecodeRunResult r = run_decode_case(c, KVCacheLayout::kNHD, o);
    EXPECT_TRUE(r.cmp.pass) << ctas << ": " << r.cmp.detail;
    EXPECT_GT(r.stats.num_merges, 0);
    if (first.empty()) first = r.out;
    EXPECT_EQ(r.out, first) << "num_ctas " << ctas;
  }
}

}  // namespace
}  // namespace pagedattn::test
