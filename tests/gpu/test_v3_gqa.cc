// GQA packing in the Hopper ("v3") bf16 prefill kernel (PagedAttentionParams::pack_gqa: a work
// tile's rows are (position, query head of one KV head) pairs) against the float64 oracle, with the
// v2 kernel's harness (random inputs, poisoned outputs, unused cache slots NaN, shuffled block ids,
// LSE checked): decode-shaped launches (odd query lengths 1 to 8, which the unpacked kernel
// refuses), groups 1, 4, 7 and 8 (7: the 128-row tile holds 18 positions and two rows of none),
// causal and not, sliding windows, sinks, split-KV, blocks 16 and 128, NHD and HND, several packed
// query tiles per request, the persistent grid and three CTAs; the backends' rule
// packing mixed passes; and what packing refuses. Needs a compute capability 9.0 device and a build
// with 90a (the refusals only the build).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "paged_attention_harness.h"
#include "test_v3_support.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

// Decode-shaped requests: 1 to 8 query tokens after contexts of odd lengths (one shorter than a
// page, one of exactly one 128-key tile plus one) and a request with no queries, two KV heads.
CaseSpec decode_case(uint64_t seed, int head_size, int block, int group) {
  CaseSpec c;
  c.seed = seed;
  c.num_kv_heads = 2;
  c.num_heads = 2 * group;
  c.head_size = head_size;
  c.block_size = block;
  c.query_lens = {1, 3, 5, 7, 1, 0, 8, 2};
  c.seq_lens = {1, 45, 300, 129, 700, 50, 8, 131};
  c.name = "v3_gqa_d" + std::to_string(head_size) + "_block" + std::to_string(block) + "_group" +
           std::to_string(group);
  return c;
}

const int kGroups[] = {1, 4, 7, 8};

TEST(PagedAttentionV3Gqa, DecodeShapes) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    int n = 0;
    for (int group : kGroups) {
      for (int block : {16, 128}) {
        for (bool causal : {true, false}) {
          CaseSpec c = decode_case(2000 + 10 * n + d, d, block, group);
          c.causal = causal;
          c.name += causal ? "_causal" : "_noncausal";
          const KVCacheLayout layout = n % 3 ? KVCacheLayout::kNHD : KVCacheLayout::kHND;
          expect_pass_with(c, layout, launch_v3_packed, "packed");
          if (n % 4 == 1) expect_pass_with(c, layout, launch_v3_packed_three_ctas, "three CTAs");
          ++n;
        }
      }
    }
  }
}

// Windows that cut the KV tiles, of one key, right-sided, longer than every request; with sinks.
TEST(PagedAttentionV3Gqa, WindowsAndSinks) {
  PAGEDATTN_REQUIRE_V3();
  const SlidingWindow windows[] = {{15, 0}, {127, 0}, {0, 0}, {20, 20}, {-1, 5}, {1000, 1000}};
  for (int d : v3_head_sizes_built()) {
    int n = 0;
    for (const SlidingWindow& w : windows) {
      const int group = kGroups[n % 4];
      CaseSpec c = decode_case(2100 + 10 * n + d, d, n % 2 ? 16 : 128, group);
      c.sliding_window = w;
      c.causal = w.right == 0 || n % 2 == 0;
      c.sinks = n % 3 != 2;
      c.name += "_window" + std::to_string(w.left) + "_" + std::to_string(w.right) +
                (c.sinks ? "_sinks" : "");
      expect_pass_with(c, n % 2 ? KVCacheLayout::kNHD : KVCacheLayout::kHND, launch_v3_packed,
                       "packed");
      ++n;
    }
  }
}

// Split-KV on decode shapes (the packed launch the small batches need): every request at the
// launch's splits and fewer per request (splits past a request's tiles: LSE -inf), with sinks.
TEST(PagedAttentionV3Gqa, SplitKv) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    for (int group : {4, 7}) {
      CaseSpec c = decode_case(2200 + group + d, d, group == 4 ? 16 : 128, group);
      c.sinks = true;
      c.name += "_splits_sinks";
      expect_pass_with(c, KVCacheLayout::kNHD, launch_v3_packed, "packed", SplitOptions{4, {}, 0});
      expect_pass_with(c, KVCacheLayout::kHND, launch_v3_packed_three_ctas, "three CTAs",
                       SplitOptions{5, {1, 2, 5, 3, 4, 5, 1, 2}, 3});
    }
  }
}

// Packed rows over several query tiles (q_len x group above the tile's rows): chunked prefills and
// a short prefill, groups 7 and 8 (18 and 16 positions per 128-row tile), causal and windowed;
// the ordinary prefill rows too (group 1 packing is the unpacked tile).
TEST(PagedAttentionV3Gqa, SeveralQueryTiles) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    int n = 0;
    for (int group : {1, 7, 8}) {
      CaseSpec c = decode_case(2300 + 10 * n + d, d, n % 2 ? 16 : 128, group);
      c.query_lens = {37, 1, 61, 19, 300};
      c.seq_lens = {400, 9, 61, 150, 300};
      c.name += "_tiles";
      expect_pass_with(c, KVCacheLayout::kNHD, launch_v3_packed, "packed");
      c.sliding_window = SlidingWindow{40, 0};
      c.sinks = true;
      c.name += "_window_sinks";
      expect_pass_with(c, KVCacheLayout::kHND, launch_v3_packed_three_ctas, "three CTAs");
      ++n;
    }
  }
}

// A pass of decodes beside prefills: the backends' rule packs it under v3 (gpu::pass_kernel), and
// the packed launch matches the oracle; with a soft cap (which packing lacks) it runs v2.
TEST(PagedAttentionV3Gqa, BackendsPackMixedPasses) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    CaseSpec c = decode_case(2500 + d, d, 16, 4);
    c.query_lens = {1, 1, 200, 1, 0, 1, 77, 1};
    c.seq_lens = {900, 45, 300, 129, 700, 50, 400, 131};
    c.name += "_mixed_chosen";
    std::vector<int32_t> qsl{0};
    for (int q : c.query_lens) qsl.push_back(qsl.back() + q);
    EXPECT_EQ(gpu::pass_kernel(qsl, c.seq_lens, c.num_heads, c.num_kv_heads, c.causal),
              gpu::PassKernel::kV3Packed);
    expect_pass_with(
        c, KVCacheLayout::kHND,
        &launch_as_the_backends_choose<gpu::PassKernel::kV3Packed, kernels::KernelGeneration::kV3>,
        "generation rule");
    c.logits_soft_cap = 30.0;
    c.name += "_softcap";
    expect_pass_with(
        c, KVCacheLayout::kNHD,
        &launch_as_the_backends_choose<gpu::PassKernel::kV3Packed, kernels::KernelGeneration::kV2>,
        "generation rule");
  }
}

// Refused before the device (runs wherever v3 and head size 128 are built): the score transforms,
// the FP8 cache and groups larger than the query tile.
kernels::PagedAttentionParams refusal_params() {
  kernels::PagedAttentionParams p;
  p.q_dtype = p.cache_dtype = DType::kBF16;
  p.head_size = 128;
  p.block_size = 16;
  p.num_heads = 8;
  p.num_kv_heads = 2;
  p.num_reqs = p.num_tokens = p.max_query_len = 1;
  p.max_seq_len = 64;
  p.scale = 0.1f;
  return p;
}

Status packed_launch_status(const kernels::PagedAttentionParams& params) {
  kernels::PagedAttentionParams p = params;
  p.pack_gqa = true;
  return kernels::detail::launch_paged_attention_v3(p, p.head_size, nullptr);
}

TEST(PagedAttentionV3Gqa, RefusesWhatPackingLacks) {
  if (!kernels::paged_attention_generation_built(kernels::KernelGeneration::kV3) ||
      !kernels::paged_attention_head_size_built(128)) {
    GTEST_SKIP() << "v3 or head size 128 not built";
  }
  kernels::PagedAttentionParams capped = refusal_params();
  capped.softcap = 30.0f;
  static const float slopes[8] = {};
  kernels::PagedAttentionParams alibi = refusal_params();
  alibi.alibi_slopes = slopes;
  for (const auto& p : {capped, alibi}) {
    const Status s = packed_launch_status(p);
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.to_string();
    EXPECT_NE(s.message().find("GQA packing with an fp8_e4m3 cache, a soft cap or ALiBi"),
              std::string::npos)
        << s.message();
  }
  kernels::PagedAttentionParams wide = refusal_params();
  wide.num_heads = 2 * 129;
  const Status s = packed_launch_status(wide);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.to_string();
  EXPECT_NE(s.message().find("GQA packing of 129 query heads per KV head (allowed: at most 128"),
            std::string::npos)
      << s.message();
  // Unpacked, the same decode shape is refused as decode-shaped (v2's).
  const Status unpacked = kernels::detail::paged_attention_v3_serves(refusal_params());
  EXPECT_EQ(unpacked.code(), StatusCode::kUnimplemented);
  EXPECT_NE(unpacked.message().find("only with GQA packing"), std::string::npos)
      << unpacked.message();
}

}  // namespace
}  // namespace pagedattn::test
