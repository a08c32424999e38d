// The Hopper ("v3") prefill kernel against the float64 oracle through the v2 kernel's harness:
// random inputs, poisoned outputs, unused cache slots NaN, shuffled block ids; prefill, chunked
// prefill and single-token rows in one launch; causal and not; GQA groups; block sizes 64-512 by
// TMA and 16 / 48 by the cp.async gather (on request); NHD and HND; head sizes 64, 128 and 256
// (those built); the dispatch's grid (persistent, one CTA per SM, at these sizes), one CTA per work
// tile, and three CTAs that each walk many tiles. The kernel needs a compute capability 9.0 device
// and a build with 90a.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "paged_attention_harness.h"
#include "test_v3_support.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

// The v3 head sizes this build has.
std::vector<int> built_head_sizes() {
  std::vector<int> sizes;
  for (int d : {64, 128, 256}) {
    if (kernels::paged_attention_head_size_built(d)) sizes.push_back(d);
  }
  return sizes;
}

// A full prefill over several query tiles, chunked prefills whose queries follow a context,
// single-token rows and a request shorter than one KV tile.
CaseSpec prefill_case(uint64_t seed, int head_size) {
  CaseSpec c;
  c.name = "v3_mixed_d" + std::to_string(head_size);
  c.seed = seed;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_size = head_size;
  c.block_size = 128;
  c.seq_lens = {300, 1, 513, 77, 260, 129};
  c.query_lens = {300, 1, 200, 77, 3, 129};
  return c;
}

void expect_pass_with(const CaseSpec& c, KVCacheLayout layout, PagedAttentionLauncher launch,
                      const char* grid, const SplitOptions& s = {}) {
  const RunResult r = run_paged_case(c, layout, s, launch);
  EXPECT_TRUE(r.cmp.pass) << c.name << " (" << grid << "): max_abs " << r.cmp.max_abs_error
                          << " rel_frob " << r.cmp.rel_frobenius << " lse " << r.cmp.max_lse_error
                          << "\n"
                          << r.cmp.detail;
}

// Through the dispatch (a persistent grid here), one CTA per tile, and three CTAs walking every
// tile.
void expect_pass(const CaseSpec& c, KVCacheLayout layout) {
  expect_pass_with(c, layout, launch_v3, "dispatch");
  expect_pass_with(c, layout, launch_v3_tile_per_cta, "one CTA per tile");
  expect_pass_with(c, layout, launch_v3_three_ctas, "three CTAs");
}

TEST(PagedAttentionV3, CausalBothLayouts) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : built_head_sizes()) {
    expect_pass(prefill_case(1, d), KVCacheLayout::kNHD);
    expect_pass_with(prefill_case(2, d), KVCacheLayout::kHND, launch_v3, "dispatch");
  }
}

TEST(PagedAttentionV3, NonCausal) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : built_head_sizes()) {
    CaseSpec c = prefill_case(3, d);
    c.causal = false;
    c.name += "_noncausal";
    expect_pass(c, KVCacheLayout::kNHD);
    expect_pass_with(c, KVCacheLayout::kHND, launch_v3, "dispatch");
  }
}

TEST(PagedAttentionV3, GqaGroupsAndBlockSizes) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : built_head_sizes()) {
    // Every group at D 128; one at the other sizes (the oracle's time).
    for (int group : d == 128 ? std::vector<int>{1, 4, 7} : std::vector<int>{4}) {
      // Head size 256 has 64-key tiles, so it also serves pages of 64.
      for (int block : {d == 256 ? 64 : 128, 256, 512}) {
        CaseSpec c = prefill_case(10 * group + block + d, d);
        c.num_heads = 2 * group;
        c.block_size = block;
        c.name += "_group" + std::to_string(group) + "_block" + std::to_string(block);
        expect_pass_with(c, block == 256 ? KVCacheLayout::kHND : KVCacheLayout::kNHD, launch_v3,
                         "dispatch");
      }
    }
  }
}

// Pages smaller than a KV tile (16; 48, not a power of 2), on request (V3Grid; the dispatch leaves
// them to v2): K and V gathered row by row through the block table (cp.async), block ids
// shuffled, so every page of a tile is elsewhere in the cache.
TEST(PagedAttentionV3, SmallPagesByGather) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : built_head_sizes()) {
    for (int block : {16, 48}) {
      CaseSpec c = prefill_case(70 + block + d, d);
      c.block_size = block;
      c.name += "_gather_block" + std::to_string(block);
      const KVCacheLayout layout = block == 16 ? KVCacheLayout::kHND : KVCacheLayout::kNHD;
      expect_pass_with(c, layout, launch_v3_gather, "gather");
      expect_pass_with(c, layout, launch_v3_gather_three_ctas, "gather, three CTAs");
      c.causal = false;
      c.name += "_noncausal";
      expect_pass_with(c, block == 16 ? KVCacheLayout::kNHD : KVCacheLayout::kHND, launch_v3_gather,
                       "gather");
    }
  }
}

// Many query and KV tiles: the ring wraps many times, causal tiles below the diagonal are unmasked.
TEST(PagedAttentionV3, LongSequences) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : built_head_sizes()) {
    CaseSpec c;
    c.name = "v3_long_d" + std::to_string(d);
    c.seed = 40 + d;
    c.num_heads = 4;
    c.num_kv_heads = 1;
    c.head_size = d;
    c.block_size = 256;
    // Shorter away from 128: the oracle's time grows with the head size.
    c.seq_lens = d == 128 ? std::vector<int>{2100, 1500} : std::vector<int>{1100, 900};
    c.query_lens = d == 128 ? std::vector<int>{2100, 700} : std::vector<int>{1100, 300};
    expect_pass_with(c, KVCacheLayout::kNHD, launch_v3, "dispatch");
    c.causal = false;
    c.name += "_noncausal";
    expect_pass_with(c, KVCacheLayout::kHND, launch_v3_three_ctas, "three CTAs");
  }
}

// Graph-capture shapes: a zero-length request, max_query_len far above the real lengths, and
// bit-identical repeated runs.
TEST(PagedAttentionV3, PaddingUpperBoundAndDeterminism) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : built_head_sizes()) {
    CaseSpec c = prefill_case(50, d);
    c.seq_lens = {40, 300, 18, 1};
    c.query_lens = {40, 0, 5, 1};
    c.name += "_padded";
    const SplitOptions upper{1, {}, 300};
    const RunResult first = run_paged_case(c, KVCacheLayout::kNHD, upper, launch_v3);
    EXPECT_TRUE(first.cmp.pass) << first.cmp.detail;
    const RunResult again = run_paged_case(c, KVCacheLayout::kNHD, upper, launch_v3);
    EXPECT_EQ(first.out, again.out);
    expect_pass_with(c, KVCacheLayout::kHND, launch_v3_three_ctas, "three CTAs", upper);
  }
}

// Checked before the device is touched: runs everywhere. A build without 90a has no v3 at all.
TEST(PagedAttentionV3, RejectsWhatItDoesNotServe) {
  kernels::PagedAttentionParams p;
  p.q_dtype = p.cache_dtype = DType::kF16;
  p.head_size = 128;
  p.block_size = 128;
  p.num_heads = p.num_kv_heads = 1;
  p.num_reqs = p.num_tokens = p.max_query_len = p.max_seq_len = 1;  // work, so v3 is reached
  alignas(16) static int32_t never_read[16];  // every case is refused before a launch
  p.out = never_read;
  p.q = p.kv_cache = never_read;
  p.cu_seqlens_q = p.seqused_k = p.block_table = never_read;
  Status s = launch_v3(p, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  if (!kernels::paged_attention_generation_built(kernels::KernelGeneration::kV3) ||
      !kernels::paged_attention_head_size_built(128)) {
    return;  // rejected by the dispatch (generation or head size not built)
  }
  EXPECT_NE(s.message().find("q_dtype f16"), std::string::npos) << s.message();
  p.q_dtype = p.cache_dtype = DType::kBF16;
  p.block_size = 16;  // v2's pages: the gather serves them only on request
  s = launch_v3(p, nullptr);
  EXPECT_NE(s.message().find("block_size 16 (allowed: multiples of 128"), std::string::npos)
      << s.message();
  p.block_size = 128;
  p.softcap = 30.0f;
  s = launch_v3(p, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("soft cap"), std::string::npos) << s.message();
  p.softcap = 0.0f;
  p.window_left = 64;
  s = launch_v3(p, nullptr);
  EXPECT_NE(s.message().find("sliding window"), std::string::npos) << s.message();
  p.window_left = -1;
  p.head_size = 96;  // a v2 size with no v3 shape
  s = launch_v3(p, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("head_size 96"), std::string::npos) << s.message();
  p.head_size = 128;
  p.num_heads = 16;  // a group of 16, one query each: decode, which v2 serves
  s = launch_v3(p, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("decode-shaped"), std::string::npos) << s.message();
}

// Schedule variants V3Bench times besides the dispatch's (launch.h, V3Grid::tuning) on every kind
// of tile boundary (requests of 1 to 300 queries, three CTAs walking all tiles), causal and not, at
// D 128: main's schedule (0), the bridge between tiles (31), the early next tile (93), all (127).
TEST(PagedAttentionV3, ScheduleVariants) {
  PAGEDATTN_REQUIRE_V3();
  if (!kernels::paged_attention_head_size_built(128)) GTEST_SKIP() << "head size 128 not built";
  const std::vector<std::pair<const char*, PagedAttentionLauncher>> variants = {
      {"tuning 0", launch_v3_tuned<0, 3>},
      {"tuning 31", launch_v3_tuned<31, 3>},
      {"tuning 93", launch_v3_tuned<93, 3>},
      {"tuning 127", launch_v3_tuned<127, 3>}};
  for (bool causal : {true, false}) {
    CaseSpec c = prefill_case(causal ? 219 : 218, 128);
    c.causal = causal;
    c.name += causal ? "_variants" : "_variants_noncausal";
    int n = 0;
    for (const auto& [name, launch] : variants) {
      expect_pass_with(c, n++ % 2 ? KVCacheLayout::kHND : KVCacheLayout::kNHD, launch, name);
    }
  }
}

}  // namespace
}  // namespace pagedattn::test
