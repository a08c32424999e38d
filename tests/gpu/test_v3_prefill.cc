// The Hopper ("v3") prefill kernel against the float64 oracle through the v2 kernel's harness:
// random inputs, poisoned outputs, unused cache slots NaN, shuffled block ids, block-table entries
// past each request's pages a huge invalid id; prefill, chunked prefill and single-token rows in
// one launch; causal and not; GQA groups; block sizes 16-512 by TMA (pages dividing the KV tile
// one box each, or a box per page and panel where the layout has no group map); NHD and HND; head
// sizes 64, 96, 128, 192 and 256 (those built); the dispatch's grid (persistent, one CTA per SM,
// at these sizes) and three CTAs that each walk many tiles. The kernel needs a compute capability
// 9.0 device and a build with 90a.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/gpu/generation.h"
#include "paged_attention_harness.h"
#include "test_v3_support.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

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

// Runs kLaunch after setting every block-table entry past each request's pages to an id far
// outside any cache (its address is unmapped): the kernel must never read those entries, which a
// scheduler may leave holding anything.
template <PagedAttentionLauncher kLaunch>
Status with_invalid_table_tails(const kernels::PagedAttentionParams& p, void* stream) {
  constexpr int32_t kInvalidId = 2147483646;  // inside the K/V map's block range, not in memory
  const int64_t width = p.block_table_stride;
  std::vector<int32_t> seq(p.num_reqs), table(static_cast<size_t>(p.num_reqs * width));
  int32_t* device_table = const_cast<int32_t*>(p.block_table);  // the harness's own buffer
  cudaMemcpy(seq.data(), p.seqused_k, seq.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(table.data(), device_table, table.size() * 4, cudaMemcpyDeviceToHost);
  for (int r = 0; r < p.num_reqs; ++r) {
    for (int64_t k = (seq[r] + p.block_size - 1) / p.block_size; k < width; ++k) {
      table[r * width + k] = kInvalidId;
    }
  }
  cudaMemcpy(device_table, table.data(), table.size() * 4, cudaMemcpyHostToDevice);
  return kLaunch(p, stream);
}

// Through the dispatch (a persistent grid here) and on three CTAs walking every tile.
void expect_pass(const CaseSpec& c, KVCacheLayout layout) {
  expect_pass_with(c, layout, launch_v3, "dispatch");
  expect_pass_with(c, layout, launch_v3_three_ctas, "three CTAs");
}

TEST(PagedAttentionV3, CausalBothLayouts) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    expect_pass(prefill_case(1, d), KVCacheLayout::kNHD);
    expect_pass_with(prefill_case(2, d), KVCacheLayout::kHND, launch_v3, "dispatch");
  }
}

TEST(PagedAttentionV3, NonCausal) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    CaseSpec c = prefill_case(3, d);
    c.causal = false;
    c.name += "_noncausal";
    expect_pass(c, KVCacheLayout::kNHD);
    expect_pass_with(c, KVCacheLayout::kHND, launch_v3, "dispatch");
  }
}

TEST(PagedAttentionV3, GqaGroupsAndBlockSizes) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    // Every group at D 128; one at the other sizes (the oracle's time).
    for (int group : d == 128 ? std::vector<int>{1, 4, 7} : std::vector<int>{4}) {
      // Head sizes 192 and 256 have 64-key tiles, so they also serve pages of 64.
      for (int block : {d > 128 ? 64 : 128, 256, 512}) {
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

// Requests of 1 to 17 tokens, ones ending mid-page and ones spanning many pages and KV tiles.
CaseSpec small_page_case(uint64_t seed, int head_size, int block) {
  CaseSpec c;
  c.name = "v3_pages_d" + std::to_string(head_size) + "_block" + std::to_string(block);
  c.seed = seed;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_size = head_size;
  c.block_size = block;
  c.seq_lens = {17, 1, 300, 77, 9, 40, 261, 129};
  c.query_lens = {17, 1, 200, 77, 9, 3, 261, 129};
  return c;
}

// Pages dividing the KV tile (16, 32, 64; 16, 32 at D 192 and 256: 64 holds their tile) by one
// TMA box per page, through the dispatch (which serves them), and at 16 also on three CTAs; the
// table's tail entries invalid; both layouts, causal and not. Block 128
// with the same requests once, at 128 keys per tile the one-box-per-tile case.
TEST(PagedAttentionV3, SmallPagesByTma) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    for (int block : {16, 32, 64, 128}) {
      CaseSpec c = small_page_case(90 + block + d, d, block);
      expect_pass_with(c, KVCacheLayout::kNHD, &with_invalid_table_tails<launch_v3>, "dispatch");
      if (block == 128) continue;
      if (block == 16) {
        expect_pass_with(c, KVCacheLayout::kHND, &with_invalid_table_tails<launch_v3_three_ctas>,
                         "three CTAs");
      }
      c.causal = false;
      c.name += "_noncausal";
      expect_pass_with(c, KVCacheLayout::kHND, &with_invalid_table_tails<launch_v3>, "dispatch");
    }
  }
}

// Runs kLaunch on a copy of the cache whose K and V planes lie 64 elements further apart than the
// harness's (padding after each plane, NaN), so that the block and plane strides are no longer
// whole 8-token groups: v3 has no group map for such a layout and copies pages smaller than the
// KV tile by a box per page and 64-column panel (the path head size 96 takes in any layout). Only
// the pages of the requests' keys are copied.
template <PagedAttentionLauncher kLaunch>
Status with_padded_planes(const kernels::PagedAttentionParams& params, void* stream) {
  constexpr int64_t kPad = 64;  // elements: strides stay multiples of 16 bytes (TMA)
  kernels::PagedAttentionParams p = params;
  const size_t elem = dtype_size(p.cache_dtype);
  const int64_t plane =
      (static_cast<const char*>(p.v_cache) - static_cast<const char*>(p.k_cache)) /
      static_cast<int64_t>(elem);
  if (p.cache_block_stride != 2 * plane) {
    return internal_error("with_padded_planes: expected the harness's K and V planes side by side");
  }
  const int64_t width = p.block_table_stride;
  std::vector<int32_t> seq(p.num_reqs), table(static_cast<size_t>(p.num_reqs * width));
  cudaMemcpy(seq.data(), p.seqused_k, seq.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(table.data(), p.block_table, table.size() * 4, cudaMemcpyDeviceToHost);
  int64_t blocks = 0;
  for (int r = 0; r < p.num_reqs; ++r) {
    for (int64_t k = 0; k < (seq[r] + p.block_size - 1) / p.block_size; ++k) {
      blocks = std::max<int64_t>(blocks, int64_t{table[r * width + k]} + 1);
    }
  }
  const size_t padded = static_cast<size_t>(plane + kPad);
  DeviceArray<uint8_t> cache(static_cast<size_t>(2 * blocks) * padded * elem);
  cudaMemset(cache.get(), 0xFF, static_cast<size_t>(2 * blocks) * padded * elem);
  cudaMemcpy2D(cache.get(), padded * elem, p.k_cache, static_cast<size_t>(plane) * elem,
               static_cast<size_t>(plane) * elem, static_cast<size_t>(2 * blocks),
               cudaMemcpyDeviceToDevice);
  p.k_cache = cache.get();
  p.v_cache = cache.get() + padded * elem;
  p.cache_block_stride = 2 * static_cast<int64_t>(padded);
  const Status st = kLaunch(p, stream);
  if (cudaStreamSynchronize(static_cast<cudaStream_t>(stream)) != cudaSuccess) {
    return internal_error("with_padded_planes: the launch failed");
  }
  return st;
}

// Pages of 16 and 32 by a box per page and panel, in layouts without a group map (padded planes),
// at every built head size, the table's tail entries invalid: causal on three CTAs in one layout,
// non-causal through the dispatch in the other.
TEST(PagedAttentionV3, SmallPagesBoxPerPanel) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    for (int block : {16, 32}) {
      CaseSpec c = small_page_case(210 + block + d, d, block);
      c.name += "_padded";
      expect_pass_with(c, KVCacheLayout::kHND,
                       &with_invalid_table_tails<with_padded_planes<launch_v3_three_ctas>>,
                       "box per panel, three CTAs");
      c.causal = false;
      c.name += "_noncausal";
      expect_pass_with(c, KVCacheLayout::kNHD,
                       &with_invalid_table_tails<with_padded_planes<launch_v3>>, "box per panel");
    }
  }
}

// The backends' per-launch rule with v3 preferred must pick v3 for pages of 16 and v2 for pages of
// 48, which v3 does not serve, and the launch it picked must match the oracle.
TEST(PagedAttentionV3, BackendsRunV3AtBlock16AndV2AtBlock48) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
    CaseSpec c = small_page_case(110 + d, d, 16);
    c.name += "_chosen";
    expect_pass_with(
        c, KVCacheLayout::kNHD,
        &with_invalid_table_tails<
            launch_as_the_backends_choose<gpu::PassKernel::kV3, kernels::KernelGeneration::kV3>>,
        "generation rule");
    c.block_size = 48;
    c.name = "v3_pages_d" + std::to_string(d) + "_block48_chosen";
    expect_pass_with(
        c, KVCacheLayout::kHND,
        &launch_as_the_backends_choose<gpu::PassKernel::kV3, kernels::KernelGeneration::kV2>,
        "generation rule");
  }
}

// Many query and KV tiles: the ring wraps many times, causal tiles below the diagonal are unmasked.
TEST(PagedAttentionV3, LongSequences) {
  PAGEDATTN_REQUIRE_V3();
  for (int d : v3_head_sizes_built()) {
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
  for (int d : v3_head_sizes_built()) {
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
  p.q = p.k_cache = p.v_cache = never_read;
  p.cu_seqlens_q = p.seqused_k = p.block_table = never_read;
  Status s = launch_v3(p, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  if (!kernels::paged_attention_generation_built(kernels::KernelGeneration::kV3) ||
      !kernels::paged_attention_head_size_built(128)) {
    return;  // rejected by the dispatch (generation or head size not built)
  }
  EXPECT_NE(s.message().find("q_dtype f16"), std::string::npos) << s.message();
  p.q_dtype = p.cache_dtype = DType::kBF16;
  p.block_size = 48;  // neither divides nor holds the tile: v2's
  s = launch_v3(p, nullptr);
  EXPECT_NE(s.message().find("block_size 48 (allowed: 16, 32, 64, or multiples of 128"),
            std::string::npos)
      << s.message();
  p.block_size = 128;
  p.cache_dtype = DType::kFP8E4M3;  // the FP8 kernel has no features (test_v3_features.cc: bf16)
  p.fp8_tensor_cores = true;
  p.k_scale = p.v_scale = reinterpret_cast<const float*>(never_read);
  p.softcap = 30.0f;
  s = launch_v3(p, nullptr);
  EXPECT_NE(s.message().find("with an fp8_e4m3 cache"), std::string::npos) << s.message();
  p.softcap = 0.0f;
  p.cache_dtype = DType::kBF16;
  p.head_size = 80;  // a v2 size with no v3 shape
  s = launch_v3(p, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("head_size 80"), std::string::npos) << s.message();
  p.head_size = 128;
  p.num_heads = 16;  // a group of 16, one query each: decode, which v2 serves
  s = launch_v3(p, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("decode-shaped"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace pagedattn::test
