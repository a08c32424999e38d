// FLASHINFER's ragged prefill on the GPU against the float64 oracle: requests without context
// (first prefills) read the new tokens' key/value instead of the cache. Their cache slots stay
// NaN (the step runs without the cache write; every other request's new tokens are written on the
// host), so an output that matches proves the ragged source was read, next to chunked prefills,
// speculative verification and decodes that read the cache. Also: the same bits as the paged
// source, and the launcher's checks of the ragged source. (No cache at all:
// test_flashinfer_cacheless.cc.)
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "flashinfer_manual_step.h"
#include "kernels/attention/paged_attention.h"
#include "paged_attention_harness.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

// A request the prefill launch serves from key/value: no context, and not a decode (in a causal
// step the one-token requests run in the decode kernel, which reads the cache).
bool reads_new_tokens(const CaseSpec& s, int r) {
  return s.seq_lens[r] == s.query_lens[r] && s.query_lens[r] > 0 &&
         (!s.causal || s.query_lens[r] > 1);
}

// Writes every request's new tokens into the batch's host cache except those of requests read
// from key/value, whose slots keep make_host_batch's NaN (checked here: otherwise the test could
// not fail). Returns how many requests read key/value.
int write_cache_except_ragged(testing::HostBatch& b) {
  const CaseSpec& s = b.spec;
  int64_t* slots = b.slot_mapping.data<int64_t>();
  const std::vector<int64_t> saved(slots, slots + s.num_tokens());
  const TensorView& cache = b.kv_cache.view();
  int ragged = 0;
  int64_t t = 0;
  for (int r = 0; r < s.num_reqs(); ++r) {
    const bool skip = reads_new_tokens(s, r);
    ragged += skip ? 1 : 0;
    for (int i = 0; i < s.query_lens[r]; ++i, ++t) {
      if (!skip) continue;
      const int64_t at =
          (slots[t] / s.block_size) * cache.stride(0) + (slots[t] % s.block_size) * cache.stride(2);
      EXPECT_TRUE(std::isnan(load_as_float(cache.data(), cache.dtype(), at))) << s.name;
      slots[t] = -1;
    }
  }
  write_new_tokens_on_host(b, cache);
  std::copy(saved.begin(), saved.end(), slots);
  return ragged;
}

BuilderParams roomy_builder(const CaseSpec& spec, KVCacheLayout layout) {
  BuilderParams bp = testing::builder_params_for(spec, layout, Device::cuda(0));
  bp.max_model_len = 1 << 17;
  return bp;
}

// One step through FLASHINFER without the device cache write, against the oracle over the cache
// with every new token written.
void expect_ragged_matches_oracle(const CaseSpec& case_spec,
                                  KVCacheLayout layout = KVCacheLayout::kNHD) {
  const AttentionBackend* backend = find_backend("FLASHINFER");
  ASSERT_NE(backend, nullptr);
  CaseSpec spec = testing::reorder_decode_first(case_spec, 1);
  spec.kv_layout = layout;
  StatusOr<testing::HostBatch> batch = testing::make_host_batch(spec, layout);
  ASSERT_TRUE(batch.ok()) << spec.name << ": " << batch.status().to_string();
  const KVCacheAllocation expected_cache = host_cache_after_write(*batch);
  EXPECT_GT(write_cache_except_ragged(*batch), 0) << spec.name << ": no request reads key/value";
  testing::StepOptions options;
  options.builder_params = roomy_builder(spec, layout);
  auto run = testing::StepRunner::for_batch(*batch, *backend, Device::cuda(0), options);
  ASSERT_TRUE(run.ok()) << spec.name << ": " << run.status().to_string();
  const Status st = (*run)->run_step(/*write_cache=*/false);
  ASSERT_TRUE(st.ok()) << spec.name << ": " << st.to_string();
  const reference::Comparison c = compare_with_oracle(**run, expected_cache);
  EXPECT_TRUE(c.pass) << spec.name << " (" << kv_cache_layout_name(layout) << "): max abs "
                      << c.max_abs_error << ", rel frob " << c.rel_frobenius << ", lse "
                      << c.max_lse_error << "\n"
                      << c.detail;
}

CaseSpec first_prefills(std::string name, uint64_t seed) {
  return small_case(std::move(name), seed, {17, 333, 2, 129, 1, 64, 701});
}

// First prefills (odd lengths) with a chunked prefill over context, speculative verification,
// decodes (one of a 1-token sequence) and a padding request.
CaseSpec mixed_ragged(std::string name, uint64_t seed) {
  return small_case(std::move(name), seed, {37, 200, 1, 630, 77, 300, 5000, 3, 40},
                    {1, 200, 1, 130, 77, 4, 1, 3, 0});
}

TEST(FlashInferRagged, FirstPrefillsOnly) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (const bool causal : {true, false}) {
    for (const DType dtype : {DType::kBF16, DType::kF16}) {
      CaseSpec s = first_prefills(
          std::string(causal ? "causal_" : "noncausal_") + std::string(dtype_name(dtype)),
          causal ? 1 : 2);
      s.causal = causal;
      s.dtype = dtype;
      expect_ragged_matches_oracle(s, KVCacheLayout::kNHD);
      expect_ragged_matches_oracle(s, KVCacheLayout::kHND);
    }
  }
}

TEST(FlashInferRagged, MixedWithChunkedPrefillsAndDecodes) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (const bool causal : {true, false}) {
    CaseSpec s = mixed_ragged(causal ? "mixed_causal" : "mixed_noncausal", causal ? 3 : 4);
    s.causal = causal;
    expect_ragged_matches_oracle(s, KVCacheLayout::kNHD);
    s.dtype = DType::kF16;
    s.block_size = 64;
    expect_ragged_matches_oracle(s, KVCacheLayout::kHND);
  }
}

TEST(FlashInferRagged, GqaGroupsAndHeadSizes) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (const auto& [hq, hkv] : {std::pair{8, 8}, std::pair{28, 4}, std::pair{64, 8}}) {
    CaseSpec s = mixed_ragged("gqa_" + std::to_string(hq) + "_" + std::to_string(hkv), 5);
    s.num_heads = hq;
    s.num_kv_heads = hkv;
    expect_ragged_matches_oracle(s);
  }
  // Padded loads (72), 32-key tiles (256) and two output-column chunks (512).
  for (const int d : {64, 72, 256, 512}) {
    if (kernels::paged_attention_kernel_head_size(d) == 0) continue;
    CaseSpec s = mixed_ragged("head_size_" + std::to_string(d), 6);
    s.head_size = d;
    expect_ragged_matches_oracle(s, KVCacheLayout::kHND);
  }
}

TEST(FlashInferRagged, Features) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s = mixed_ragged("window_softcap", 7);
  s.sliding_window = SlidingWindow{63, 0};
  s.logits_soft_cap = 30.0;
  expect_ragged_matches_oracle(s);
  s = mixed_ragged("encoder_window_alibi_sinks", 8);
  s.causal = false;
  s.sliding_window = SlidingWindow{31, 31};
  s.alibi = true;
  s.sinks = true;
  expect_ragged_matches_oracle(s, KVCacheLayout::kHND);
}

// One long first prefill over few heads: the prefill plan splits its keys.
TEST(FlashInferRagged, SplitKv) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s = small_case("split_first_prefill", 9, {1500});
  s.num_heads = 4;
  s.num_kv_heads = 1;
  s.causal = false;
  expect_ragged_matches_oracle(s);
}

// FP8 caches never go ragged: first prefills read the cache, which the step's cache write fills.
TEST(FlashInferRagged, Fp8CacheReadsTheCache) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s = mixed_ragged("fp8_mixed", 10);
  s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  expect_flashinfer_matches_oracle(s);
}

// The same step with key/value (first prefills read them) and without (every key from the
// cache, written by the step's cache update): the same tiles and math, so the same bits.
TEST(FlashInferRagged, RaggedAndPagedAgreeBitForBit) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (const bool causal : {true, false}) {
    CaseSpec s = mixed_ragged(causal ? "bits_causal" : "bits_noncausal", 20);
    s.causal = causal;
    s = testing::reorder_decode_first(s, 1);
    ManualStep step(s, AttentionType::kDecoder, "FLASHINFER", Device::cuda(0));
    ASSERT_TRUE(step.ready());
    const Status paged = step.run(StepCache::kUpdated, /*with_new_tokens=*/false);
    ASSERT_TRUE(paged.ok()) << paged.to_string();
    const reference::Comparison c = step.compare();
    EXPECT_TRUE(c.pass) << s.name << ": " << c.detail;
    const std::vector<uint8_t> paged_bits = step.output_bytes();
    const Status ragged = step.run(StepCache::kUpdated, /*with_new_tokens=*/true);
    ASSERT_TRUE(ragged.ok()) << ragged.to_string();
    EXPECT_TRUE(step.output_bytes() == paged_bits) << s.name;
    // Key/value rows the kernel cannot copy in 16 bytes: with a cache the step reads the cache
    // instead of failing.
    const TensorView skewed = step.unaligned_new_tokens();
    const Status fallback = step.run(StepCache::kUpdated, skewed, skewed);
    ASSERT_TRUE(fallback.ok()) << fallback.to_string();
    EXPECT_TRUE(step.output_bytes() == paged_bits) << s.name << " (unaligned key/value)";
  }
}

// Metadata built for CUDA-graph capture (the decode kernel launched whatever the mix, the
// graph-safe split bound), eagerly and captured in a graph: first prefills still read key/value
// (their cache slots are NaN; the step's cache update does not run).
TEST(FlashInferRagged, CudaGraphCapture) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (const bool causal : {true, false}) {
    CaseSpec s = mixed_ragged(causal ? "graph_causal" : "graph_noncausal", 23);
    s.causal = causal;
    s = testing::reorder_decode_first(s, 1);
    ManualStepOptions options;
    options.capture = true;
    options.edit = [](testing::HostBatch& b) { EXPECT_GT(write_cache_except_ragged(b), 0); };
    ManualStep step(s, AttentionType::kDecoder, "FLASHINFER", Device::cuda(0), options);
    ASSERT_TRUE(step.ready());
    const testing::StepOperands& o = step.operands();
    Status st = step.run(StepCache::kAsPlaced, o.key, o.value);
    ASSERT_TRUE(st.ok()) << st.to_string();
    reference::Comparison c = step.compare();
    EXPECT_TRUE(c.pass) << s.name << " (eager): " << c.detail;
    const std::vector<uint8_t> eager_bits = step.output_bytes();
    st = step.run_in_graph(StepCache::kAsPlaced, o.key, o.value);
    ASSERT_TRUE(st.ok()) << st.to_string();
    c = step.compare();
    EXPECT_TRUE(c.pass) << s.name << " (graph): " << c.detail;
    EXPECT_TRUE(step.output_bytes() == eager_bits) << s.name;
  }
}

// The launcher's checks of the ragged source (nothing is launched).
TEST(FlashInferRagged, KernelRejectsBadRaggedSources) {
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
  expect_error(StatusCode::kInvalidArgument, "kv_cache is required without k_new/v_new");
  p.k_new = buf.get();
  expect_error(StatusCode::kInvalidArgument, "k_new and v_new must be given together");
  p.v_new = static_cast<char*>(buf.get()) + 8;
  expect_error(StatusCode::kInvalidArgument, "16-byte aligned");
  p.v_new = buf.get();
  p.kv_cache = buf.get();
  p.cache_dtype = DType::kFP8E4M3;
  p.k_scale = p.v_scale = buf.as<float>();
  expect_error(StatusCode::kInvalidArgument, "need a cache of q_dtype or none");
  p.kv_cache = nullptr;  // an FP8 cache_dtype picks the FP8 kernels, which never read k_new
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
