// The paged attention kernel (generation v2, mma.sync) against the float64 oracle: mixed batches,
// GQA groups, block sizes, layouts, dtypes, every mask/score feature, FP8 caches, split-KV.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "paged_attention_harness.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

// Decode, spec-verify, chunked prefill and prefill (odd lengths) in one launch.
CaseSpec mixed_case(uint64_t seed) {
  CaseSpec c;
  c.name = "mixed";
  c.seed = seed;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_size = 128;
  c.block_size = 16;
  c.seq_lens = {1, 17, 130, 77, 200, 65, 33};
  c.query_lens = {1, 1, 4, 77, 37, 8, 1};
  return c;
}

void expect_pass(const CaseSpec& c, KVCacheLayout layout, const SplitOptions& s = {}) {
  const RunResult r = run_paged_case(c, layout, s);
  EXPECT_TRUE(r.cmp.pass) << c.name << ": " << r.cmp;
}

TEST(PagedAttentionKernel, MixedBatchBothLayoutsAndDtypes) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (KVCacheLayout layout : {KVCacheLayout::kNHD, KVCacheLayout::kHND}) {
      CaseSpec c = mixed_case(11);
      c.dtype = dt;
      c.name = std::string("mixed_") + std::string(dtype_name(dt));
      expect_pass(c, layout);
    }
  }
}

TEST(PagedAttentionKernel, NonCausal) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec c = mixed_case(12);
  c.causal = false;
  expect_pass(c, KVCacheLayout::kNHD);
}

TEST(PagedAttentionKernel, GqaGroups) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (int group : {1, 4, 7, 8, 16}) {
    CaseSpec c = mixed_case(20 + group);
    c.num_kv_heads = 2;
    c.num_heads = 2 * group;
    c.name = "gqa_" + std::to_string(group);
    expect_pass(c, KVCacheLayout::kNHD);
  }
}

TEST(PagedAttentionKernel, BlockSizes) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (int bs : {16, 32, 64, 256}) {
    CaseSpec c = mixed_case(30 + bs);
    c.block_size = bs;
    c.name = "block_" + std::to_string(bs);
    expect_pass(c, bs == 32 ? KVCacheLayout::kHND : KVCacheLayout::kNHD);
  }
}

TEST(PagedAttentionKernel, HeadSizesServedByLargerInstances) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (int d : {32, 64, 72, 80, 96, 104, 128, 136, 192, 200, 256, 512}) {
    if (kernels::paged_attention_kernel_head_size(d) == 0) continue;
    CaseSpec c = mixed_case(40 + d);
    c.head_size = d;
    c.name = "head_" + std::to_string(d);
    expect_pass(c, KVCacheLayout::kNHD);
  }
}

TEST(PagedAttentionKernel, SlidingWindows) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const SlidingWindow windows[] = {{15, 0}, {63, 0}, {0, 0}, {20, 20}, {-1, 5}};
  for (const SlidingWindow& w : windows) {
    for (bool causal : {true, false}) {
      CaseSpec c = mixed_case(50 + w.left);
      c.sliding_window = w;
      c.causal = causal;
      c.name = "window_" + std::to_string(w.left) + "_" + std::to_string(w.right) +
               (causal ? "_causal" : "_noncausal");
      expect_pass(c, KVCacheLayout::kNHD);
    }
  }
}

TEST(PagedAttentionKernel, AlibiSoftcapSinks) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (int mask = 1; mask < 8; ++mask) {
    CaseSpec c = mixed_case(60 + mask);
    c.alibi = mask & 1;
    c.logits_soft_cap = (mask & 2) ? 30.0 : 0.0;
    c.sinks = mask & 4;
    c.scale = 0.3;  // large enough for the soft cap to matter
    c.name = "features_" + std::to_string(mask);
    expect_pass(c, KVCacheLayout::kNHD);
    if (mask == 7) {
      c.sliding_window = SlidingWindow{10, 0};
      c.name = "features_all_window";
      expect_pass(c, KVCacheLayout::kHND, SplitOptions{3, {}, 0});
    }
  }
}

// Caps so large that tanh's argument is far below float epsilon: the scores must pass unchanged
// (a soft cap computed as a ratio of exponentials flattens them to 0; one folded with log2 e
// overflows near float's maximum).
TEST(PagedAttentionKernel, LargeSoftCaps) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (double cap : {1.0, 1e3, 1e7, 1e10, 1e20, 1e30, 3e38}) {
    CaseSpec c = mixed_case(65);
    c.logits_soft_cap = cap;
    c.scale = 0.3;
    c.name = "softcap_" + std::to_string(cap);
    expect_pass(c, KVCacheLayout::kNHD);
    expect_pass(c, KVCacheLayout::kHND, SplitOptions{3, {}, 0});
  }
}

TEST(PagedAttentionKernel, Fp8Caches) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (KVCacheDType kv : {KVCacheDType::kFP8E4M3, KVCacheDType::kFP8E5M2}) {
    for (bool per_head : {false, true}) {
      for (DType dt : {DType::kBF16, DType::kF16}) {
        CaseSpec c = mixed_case(70 + per_head);
        c.kv_cache_dtype = kv;
        c.kv_scale_per_head = per_head;
        c.dtype = dt;
        c.name = std::string(kv_cache_dtype_name(kv)) + (per_head ? "_head_" : "_tensor_") +
                 std::string(dtype_name(dt));
        expect_pass(c, per_head ? KVCacheLayout::kHND : KVCacheLayout::kNHD);
      }
    }
    // Head size 72 (not a multiple of 16, served by the 80 kernel): the 8-byte copy path, whose
    // last chunk of each row ends at head_size; the neighbouring bytes must not be read.
    CaseSpec c = mixed_case(75);
    c.kv_cache_dtype = kv;
    c.head_size = 72;
    c.name = std::string(kv_cache_dtype_name(kv)) + "_d72";
    expect_pass(c, KVCacheLayout::kNHD);
  }
}

TEST(PagedAttentionKernel, SplitKv) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec c = mixed_case(80);
  c.name = "split_uniform";
  expect_pass(c, KVCacheLayout::kNHD, SplitOptions{4, {}, 0});
  // Per-request counts, including more splits than KV tiles (empty splits).
  c.name = "split_per_request";
  expect_pass(c, KVCacheLayout::kNHD, SplitOptions{8, {1, 8, 3, 2, 5, 8, 1}, 0});
  c.sinks = true;
  c.sliding_window = SlidingWindow{40, 0};
  c.name = "split_sinks_window";
  expect_pass(c, KVCacheLayout::kHND, SplitOptions{5, {}, 0});
}

TEST(PagedAttentionKernel, LongContextDecodeAndPrefill) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec c;
  c.name = "long";
  c.seed = 90;
  c.num_heads = 8;
  c.num_kv_heads = 1;
  c.head_size = 128;
  c.block_size = 16;
  c.seq_lens = {4097, 1500, 700};
  c.query_lens = {1, 300, 700};
  expect_pass(c, KVCacheLayout::kNHD);
  expect_pass(c, KVCacheLayout::kNHD, SplitOptions{6, {}, 0});
  // A window far shorter than the sequences: the splits share its few visible tiles.
  c.name = "long_window";
  c.sliding_window = SlidingWindow{333, -1};
  expect_pass(c, KVCacheLayout::kHND, SplitOptions{6, {}, 0});
}

TEST(PagedAttentionKernel, WindowDiagonalOnly) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec c = mixed_case(95);
  c.sliding_window = SlidingWindow{0, 0};
  c.name = "diagonal_only";
  expect_pass(c, KVCacheLayout::kNHD);
}

// Graph-capture shapes: a zero-length request (padding), max_query_len far above the real lengths
// (forcing the prefill-shaped kernel on a decode batch), and bit-identical repeated runs.
TEST(PagedAttentionKernel, UpperBoundsPaddingAndDeterminism) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec c = mixed_case(97);
  c.seq_lens = {40, 300, 18, 1};
  c.query_lens = {1, 0, 1, 1};
  c.name = "padded_decode";
  SplitOptions opts{1, {}, 500};
  const RunResult first = run_paged_case(c, KVCacheLayout::kNHD, opts);
  EXPECT_TRUE(first.cmp.pass) << first.cmp.detail;
  const RunResult again = run_paged_case(c, KVCacheLayout::kNHD, opts);
  EXPECT_EQ(first.out, again.out);
  opts.max_num_splits = 3;
  expect_pass(c, KVCacheLayout::kHND, opts);
}

TEST(PagedAttentionKernel, RejectsWhatItCannotServe) {
  kernels::PagedAttentionParams p;
  p.q_dtype = DType::kF32;
  p.head_size = 128;
  p.num_heads = p.num_kv_heads = 1;
  p.block_size = 16;
  Status s = kernels::launch_paged_attention(p, nullptr);
  if (kernels::paged_attention_kernel_head_size(128) == 0) {
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
    return;
  }
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("q_dtype"), std::string::npos) << s.message();
  p.q_dtype = DType::kBF16;
  p.cache_dtype = DType::kBF16;
  p.block_size = 8;
  s = kernels::launch_paged_attention(p, nullptr);
  EXPECT_NE(s.message().find("block_size"), std::string::npos) << s.message();
  p.block_size = 16;
  p.cache_block_stride = int64_t{1} << 31;  // the kernel's block offsets are 32-bit
  s = kernels::launch_paged_attention(p, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cache strides (block 2147483648"), std::string::npos)
      << s.message();
  p.cache_block_stride = 0;
  p.head_size = 100;
  EXPECT_EQ(kernels::launch_paged_attention(p, nullptr).code(), StatusCode::kUnimplemented);
  EXPECT_EQ(kernels::paged_attention_kernel_head_size(0), 0);
  EXPECT_EQ(kernels::paged_attention_kernel_head_size(100), 0);
  EXPECT_TRUE(kernels::paged_attention_generation_built(kernels::KernelGeneration::kV2));
}

}  // namespace
}  // namespace pagedattn::test
