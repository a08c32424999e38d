// The v2 paged attention kernel's ragged source (PagedAttentionParams::k_new/v_new) against the
// float64 oracle, launched directly: requests without context read the new tokens' K/V, whose
// cache slots stay NaN (run_paged_case's RaggedSource), so only the ragged source can give the
// oracle's result for them; the others (chunked prefills, decodes) read the cache in the same
// launch. Also: the same bits as the paged source, no cache at all, and the launcher's refusals.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "paged_attention_harness.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

// First prefills of odd lengths (one a single token) beside a chunked prefill over context,
// speculative verification, decodes and a padding request.
CaseSpec ragged_mix(std::string name, uint64_t seed) {
  CaseSpec c;
  c.name = std::move(name);
  c.seed = seed;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.seq_lens = {37, 333, 1, 630, 77, 300, 129, 40, 701};
  c.query_lens = {1, 333, 1, 130, 77, 4, 129, 0, 701};
  return c;
}

// Only requests without context (encoders).
CaseSpec first_prefills(std::string name, uint64_t seed) {
  CaseSpec c = ragged_mix(std::move(name), seed);
  c.seq_lens = c.query_lens = {17, 333, 2, 129, 1, 64, 701};
  return c;
}

RunResult expect_ragged_pass(const CaseSpec& c, KVCacheLayout layout, RaggedSource ragged = {},
                             const SplitOptions& splits = {}) {
  ragged.enabled = true;
  const RunResult r = run_paged_case(c, layout, splits, kernels::launch_paged_attention, ragged);
  EXPECT_TRUE(r.cmp.pass) << c.name << " (" << kv_cache_layout_name(layout) << "): " << r.cmp;
  return r;
}

// Both sources run the same tiles and math: the ragged launch gives the paged launch's bits.
TEST(PagedAttentionRagged, MixedBatchMatchesOracleAndPagedBits) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (const bool causal : {true, false}) {
    for (const DType dt : {DType::kBF16, DType::kF16}) {
      for (const KVCacheLayout layout : {KVCacheLayout::kNHD, KVCacheLayout::kHND}) {
        CaseSpec c =
            ragged_mix(std::string(causal ? "causal_" : "noncausal_") + std::string(dtype_name(dt)),
                       causal ? 1 : 2);
        c.causal = causal;
        c.dtype = dt;
        const RunResult ragged = expect_ragged_pass(c, layout);
        const RunResult paged = run_paged_case(c, layout);
        EXPECT_TRUE(paged.cmp.pass) << c.name << " (paged): " << paged.cmp.detail;
        EXPECT_TRUE(ragged.out == paged.out)
            << c.name << " (" << kv_cache_layout_name(layout) << "): ragged and paged bits differ";
      }
    }
  }
}

TEST(PagedAttentionRagged, GqaGroupsAndHeadSizes) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (const int group : {1, 7, 16}) {
    CaseSpec c = ragged_mix("gqa_" + std::to_string(group), 10 + group);
    c.num_heads = 2 * group;
    expect_ragged_pass(c, group == 7 ? KVCacheLayout::kHND : KVCacheLayout::kNHD);
  }
  // Served by larger instances with padded loads (72, 64), 32-key tiles (256), two output-column
  // chunks (512).
  for (const int d : {64, 72, 256, 512}) {
    if (kernels::paged_attention_kernel_head_size(d) == 0) continue;
    CaseSpec c = ragged_mix("head_size_" + std::to_string(d), 20 + d);
    c.head_size = d;
    c.block_size = 32;
    expect_ragged_pass(c, KVCacheLayout::kHND);
  }
}

TEST(PagedAttentionRagged, FeaturesAndPaddedRows) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec c = ragged_mix("window_softcap_padded_rows", 30);
  c.sliding_window = SlidingWindow{63, 0};
  c.logits_soft_cap = 30.0;
  RaggedSource padded;
  padded.token_pad = 24;  // key/value rows inside a wider (fused) row: NaN between them
  expect_ragged_pass(c, KVCacheLayout::kNHD, padded);
  c = ragged_mix("noncausal_window_alibi_sinks", 31);
  c.causal = false;
  c.sliding_window = SlidingWindow{31, 31};
  c.alibi = true;
  c.sinks = true;
  c.dtype = DType::kF16;
  c.block_size = 64;
  expect_ragged_pass(c, KVCacheLayout::kHND);
}

// Split-KV over first prefills: partials from the ragged source, merged by the combine.
TEST(PagedAttentionRagged, SplitKv) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec c = ragged_mix("split", 40);
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.causal = false;
  SplitOptions splits;
  splits.max_num_splits = 3;
  splits.per_req = {1, 3, 1, 2, 3, 1, 2, 1, 3};
  expect_ragged_pass(c, KVCacheLayout::kNHD, {}, splits);
}

// No cache at all (kv_cache and block_table null): every request reads k_new/v_new.
TEST(PagedAttentionRagged, WithoutCache) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  RaggedSource no_cache;
  no_cache.with_cache = false;
  for (const bool causal : {true, false}) {
    CaseSpec c = first_prefills(causal ? "no_cache_causal" : "no_cache_noncausal", 50);
    c.causal = causal;
    c.num_heads = 28;
    c.num_kv_heads = 4;
    expect_ragged_pass(c, KVCacheLayout::kNHD, no_cache);
  }
  CaseSpec c = first_prefills("no_cache_f16_window", 51);
  c.dtype = DType::kF16;
  c.causal = false;
  c.sliding_window = SlidingWindow{40, 40};
  no_cache.token_pad = 8;
  expect_ragged_pass(c, KVCacheLayout::kNHD, no_cache);
}

// The launcher's checks of the ragged source (nothing is launched).
TEST(PagedAttentionRagged, LauncherRejectsBadSources) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  if (kernels::paged_attention_kernel_head_size(128) == 0) GTEST_SKIP() << "no head size 128";
  DeviceBuffer buf(1 << 16);
  kernels::PagedAttentionParams p;
  p.q = p.out = buf.get();
  p.cu_seqlens_q = p.seqused_k = buf.as<int32_t>();
  p.num_reqs = p.num_tokens = p.max_query_len = 1;
  p.num_heads = p.num_kv_heads = 1;
  p.head_size = 128;
  p.block_size = 16;
  const auto expect_error = [&](StatusCode code, const std::string& text) {
    const Status s = kernels::launch_paged_attention(p, nullptr);
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(text), std::string::npos) << s.to_string();
  };
  expect_error(StatusCode::kInvalidArgument,
               "k_cache and v_cache are required without k_new/v_new");
  p.k_new = buf.get();
  expect_error(StatusCode::kInvalidArgument, "k_new and v_new must be given together");
  p.v_new = static_cast<char*>(buf.get()) + 8;
  expect_error(StatusCode::kInvalidArgument, "16-byte aligned");
  p.v_new = buf.get();
  p.k_cache = p.v_cache = buf.get();
  p.cache_dtype = DType::kFP8E4M3;
  p.k_scale = p.v_scale = buf.as<float>();
  expect_error(StatusCode::kInvalidArgument, "need a cache of q_dtype or none");
  p.k_cache = p.v_cache = nullptr;  // FP8 cache_dtype picks the FP8 kernels (never read k_new)
  expect_error(StatusCode::kInvalidArgument, "need a cache of q_dtype or none");
  p.cache_dtype = DType::kBF16;
  p.new_token_stride = int64_t{1} << 31;
  expect_error(StatusCode::kInvalidArgument, "below 2^31");
  p.new_token_stride = 128;
  p.generation = kernels::KernelGeneration::kV3;
  const Status v3 = kernels::paged_attention_serves(p);
  EXPECT_FALSE(v3.ok());
  if (kernels::paged_attention_generation_built(kernels::KernelGeneration::kV3)) {
    EXPECT_NE(v3.message().find("no ragged KV source"), std::string::npos) << v3.to_string();
    expect_error(StatusCode::kUnimplemented, "no ragged KV source");
  }
}

}  // namespace
}  // namespace pagedattn::test
