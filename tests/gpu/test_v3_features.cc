// The attention definition's features through the Hopper ("v3") bf16 prefill kernel against the
// float64 oracle (the v2 kernel's harness: random inputs, poisoned outputs, unused cache slots NaN,
// shuffled block ids, LSE checked): sliding windows (left, right, both, with and without causal,
// windows that cut KV tiles on both sides and ones longer than every request), the soft cap (with
// caps up to float's maximum), ALiBi, sinks and their combinations, split-KV; odd lengths (prefill,
// chunked prefill, single-token rows), GQA, blocks 16 and 128, NHD and HND, the built head sizes;
// through the dispatch and on three CTAs walking every tile. Needs a compute
// capability 9.0 device and a build with 90a.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/gpu/generation.h"
#include "paged_attention_harness.h"
#include "test_v3_support.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

// Lengths that are no multiple of any tile: a prefill over several query tiles, chunked prefills
// after a context, single-token rows, a request shorter than one KV tile.
CaseSpec feature_case(uint64_t seed, int head_size, int block) {
  CaseSpec c;
  c.seed = seed;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.head_size = head_size;
  c.block_size = block;
  c.seq_lens = {300, 1, 613, 77, 260, 129};
  c.query_lens = {300, 1, 421, 77, 3, 129};
  c.name = "v3_features_d" + std::to_string(head_size) + "_block" + std::to_string(block);
  return c;
}

std::string window_name(const SlidingWindow& w) {
  return "_window" + std::to_string(w.left) + "_" + std::to_string(w.right);
}

// Left, right and both sides; windows cutting the 128-key tiles (and the 64-key ones of D 192 and
// 256) on both sides, windows of one key, windows longer than every request.
const SlidingWindow kWindows[] = {{15, 0},   {127, 0},   {0, 0},       {20, 20}, {-1, 5},
                                  {200, -1}, {130, 300}, {1000, 1000}, {-1, 700}};

TEST(PagedAttentionV3Features, SlidingWindows) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    int n = 0;
    for (const SlidingWindow& w : kWindows) {
      for (bool causal : {true, false}) {
        CaseSpec c = feature_case(300 + n, d, n % 2 ? 16 : 128);
        c.sliding_window = w;
        c.causal = causal;
        c.name += window_name(w) + (causal ? "_causal" : "_noncausal");
        const KVCacheLayout layout = n % 3 ? KVCacheLayout::kNHD : KVCacheLayout::kHND;
        expect_pass_with(c, layout, launch_v3, "dispatch");
        if (d == 128 && n % 4 == 0) {
          expect_pass_with(c, layout, launch_v3_three_ctas, "three CTAs");
        }
        ++n;
      }
    }
  }
}

// Long requests with short windows: most KV tiles of a query tile lie outside its window, so the
// producer and consumers skip them (start and end), across many query tiles and the ring wrapping.
TEST(PagedAttentionV3Features, LongSequencesShortWindows) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    int n = 0;
    for (const SlidingWindow& w : {SlidingWindow{333, 0}, SlidingWindow{256, 256},
                                   SlidingWindow{100, 400}, SlidingWindow{-1, 190}}) {
      CaseSpec c;
      c.name = "v3_long_d" + std::to_string(d) + window_name(w);
      c.seed = 400 + d + n;
      c.num_heads = 4;
      c.num_kv_heads = 1;
      c.head_size = d;
      c.block_size = n % 2 ? 16 : 256;
      c.seq_lens = {1700, 1300};
      c.query_lens = {1700, 500};
      c.sliding_window = w;
      c.causal = w.right == 0;
      expect_pass_with(c, n % 2 ? KVCacheLayout::kHND : KVCacheLayout::kNHD, launch_v3, "dispatch");
      if (n == 1) expect_pass_with(c, KVCacheLayout::kNHD, launch_v3_three_ctas, "three CTAs");
      ++n;
    }
  }
}

// Every combination of ALiBi, soft cap 30 and sinks, causal and not; all three with a window.
TEST(PagedAttentionV3Features, AlibiSoftCapSinks) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    for (int mask = 1; mask < 8; ++mask) {
      CaseSpec c = feature_case(500 + 10 * mask + d, d, mask % 2 ? 16 : 128);
      c.alibi = mask & 1;
      c.logits_soft_cap = (mask & 2) ? 30.0 : 0.0;
      c.sinks = mask & 4;
      c.scale = 0.3;  // large enough for the soft cap to matter
      c.causal = mask != 3;
      c.name += "_features" + std::to_string(mask) + (c.causal ? "" : "_noncausal");
      expect_pass_with(c, mask % 3 ? KVCacheLayout::kNHD : KVCacheLayout::kHND, launch_v3,
                       "dispatch");
      if (mask == 7) {
        expect_pass_with(c, KVCacheLayout::kNHD, launch_v3_three_ctas, "three CTAs");
        c.sliding_window = SlidingWindow{150, 20};
        c.name += window_name(*c.sliding_window);
        expect_pass_with(c, KVCacheLayout::kHND, launch_v3, "dispatch");
        expect_pass_with(c, KVCacheLayout::kNHD, launch_v3_three_ctas, "three CTAs");
      }
    }
  }
}

// Caps from 1 to float's maximum: small ones flatten the scores, large ones must leave them intact
// (caps from 2^100 on are no soft cap at all, mask.h).
TEST(PagedAttentionV3Features, SoftCaps) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    for (double cap : {1.0, 5.0, 1e3, 1e10, 1e30, 3e38}) {
      CaseSpec c = feature_case(600 + d, d, 128);
      c.logits_soft_cap = cap;
      c.scale = 0.3;
      c.name += "_softcap" + std::to_string(cap);
      expect_pass_with(c, KVCacheLayout::kNHD, launch_v3, "dispatch");
    }
  }
}

// Sinks far above and far below the scores (scaled): the sink takes nearly all the weight, or none.
TEST(PagedAttentionV3Features, SinksDominateOrVanish) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    for (double scale : {0.01, 1.0}) {
      CaseSpec c = feature_case(700 + d, d, 16);
      c.sinks = true;
      c.scale = scale;
      c.sliding_window = SlidingWindow{40, 0};
      c.name += "_sinks_scale" + std::to_string(scale);
      expect_pass_with(c, KVCacheLayout::kHND, launch_v3, "dispatch");
    }
  }
}

// GQA groups 1 (MHA), 4 and 7 with every feature.
TEST(PagedAttentionV3Features, GqaGroups) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    for (int group : {1, 4, 7}) {
      CaseSpec c = feature_case(800 + group + d, d, group == 4 ? 16 : 128);
      c.num_heads = 2 * group;
      c.alibi = true;
      c.sinks = true;
      c.logits_soft_cap = 50.0;
      c.sliding_window = SlidingWindow{90, 90};
      c.causal = group != 7;
      c.name += "_group" + std::to_string(group);
      expect_pass_with(c, KVCacheLayout::kNHD, launch_v3, "dispatch");
    }
  }
}

// The backends' per-launch rule picks v3 for every feature now (and the launch matches the oracle).
TEST(PagedAttentionV3Features, BackendsChooseV3) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    CaseSpec c = feature_case(900 + d, d, 16);
    c.alibi = c.sinks = true;
    c.logits_soft_cap = 20.0;
    c.sliding_window = SlidingWindow{64, 0};
    c.name += "_chosen";
    expect_pass_with(
        c, KVCacheLayout::kNHD,
        &launch_as_the_backends_choose<gpu::PassKernel::kV3, kernels::KernelGeneration::kV3>,
        "generation rule");
  }
}

// Split-KV: partials per split and the combine (sinks added there once): as many splits as the
// launch allows and fewer per request, splits past a request's KV tiles (empty: LSE -inf), with
// windows (a split's share of the visible tiles) and every feature, the dispatch and three CTAs.
TEST(PagedAttentionV3Features, SplitKv) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    CaseSpec c = feature_case(1000 + d, d, 16);
    c.name += "_splits";
    expect_pass_with(c, KVCacheLayout::kNHD, launch_v3, "dispatch", SplitOptions{3, {}, 0});
    expect_pass_with(c, KVCacheLayout::kHND, launch_v3, "dispatch, per request",
                     SplitOptions{4, {1, 2, 4, 3, 4, 2}, 0});
    c.causal = false;
    c.sliding_window = SlidingWindow{100, 60};
    c.sinks = true;
    c.name += "_window_sinks";
    expect_pass_with(c, KVCacheLayout::kNHD, launch_v3_three_ctas, "three CTAs",
                     SplitOptions{5, {}, 0});
    c.alibi = true;
    c.logits_soft_cap = 30.0;
    c.scale = 0.3;
    c.block_size = 128;
    c.name += "_alibi_softcap";
    expect_pass_with(c, KVCacheLayout::kHND, launch_v3, "dispatch", SplitOptions{2, {}, 0});
  }
}

// Long requests cut into many splits, with the graph's upper bound on the query length.
TEST(PagedAttentionV3Features, SplitKvLong) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    CaseSpec c;
    c.name = "v3_long_splits_d" + std::to_string(d);
    c.seed = 1100 + d;
    c.num_heads = 8;
    c.num_kv_heads = 2;
    c.head_size = d;
    c.block_size = 64;
    c.seq_lens = {3000, 1700, 40};
    c.query_lens = {64, 300, 40};
    c.sinks = true;
    expect_pass_with(c, KVCacheLayout::kNHD, launch_v3, "dispatch", SplitOptions{8, {8, 3, 8}, 37});
  }
}

// The FP8 kernel has no splits: refused before the device (runs wherever v3 is built).
TEST(PagedAttentionV3Features, Fp8RefusesSplitKv) {
  if (!kernels::paged_attention_generation_built(kernels::KernelGeneration::kV3) ||
      !kernels::paged_attention_head_size_built(128)) {
    GTEST_SKIP() << "v3 or head size 128 not built";
  }
  kernels::PagedAttentionParams p;
  p.q_dtype = DType::kBF16;
  p.cache_dtype = DType::kFP8E4M3;
  p.fp8_tensor_cores = true;
  p.head_size = p.block_size = 128;
  p.num_heads = p.num_kv_heads = 1;
  p.num_reqs = p.num_tokens = p.max_query_len = p.max_seq_len = 64;
  p.max_num_splits = 2;
  static const float scales[1] = {1.0f};
  p.k_scale = p.v_scale = scales;
  const Status s = kernels::detail::paged_attention_v3_serves(p);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("split-KV with an fp8_e4m3 cache"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace pagedattn::test
