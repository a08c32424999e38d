// FLASHINFER's encoder and encoder-only attention with no KV cache at all on the GPU against the
// float64 oracle (forward gets an undefined cache, the cache update writes nothing), CPU_ATTN's
// parity on the host, and the steps that need a cache refused as Status values.
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "flashinfer_manual_step.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

// Encoder attention with no KV cache: forward's status, and the comparison when it ran.
struct CachelessRun {
  Status forward;
  reference::Comparison cmp;
};

CachelessRun run_without_cache(const CaseSpec& spec, AttentionType type,
                               const std::string& backend_name = "FLASHINFER",
                               const Device& device = Device::cuda(0)) {
  ManualStep step(spec, type, backend_name, device);
  CachelessRun result;
  result.forward = step.run(StepCache::kNone, /*with_new_tokens=*/true);
  if (result.forward.ok()) result.cmp = step.compare();
  return result;
}

void expect_cacheless_matches_oracle(const CaseSpec& spec, AttentionType type,
                                     const std::string& backend = "FLASHINFER",
                                     const Device& device = Device::cuda(0)) {
  const CachelessRun r = run_without_cache(spec, type, backend, device);
  ASSERT_TRUE(r.forward.ok()) << spec.name << ": " << r.forward.to_string();
  EXPECT_TRUE(r.cmp.pass) << backend << " " << spec.name << ": " << r.cmp;
}

// The cache update of an encoder layer without a cache writes nothing and succeeds; a decoder
// layer's needs the cache.
TEST(FlashInferCacheless, CacheUpdateWithoutCache) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const AttentionBackend* backend = find_backend("FLASHINFER");
  ASSERT_NE(backend, nullptr);
  const CaseSpec s = small_case("cache_update", 19, {5});
  StatusOr<testing::HostBatch> batch = testing::make_host_batch(s, KVCacheLayout::kNHD);
  ASSERT_TRUE(batch.ok());
  auto placement = testing::place_on_cuda(*batch, 0);
  ASSERT_TRUE(placement.ok());
  const testing::StepOperands& o = (*placement)->operands();
  for (const AttentionType type : {AttentionType::kEncoderOnly, AttentionType::kDecoder}) {
    AttentionImplParams ip = impl_params_for(*batch);
    ip.attn_type = type;
    auto impl = backend->make_impl(ip);
    ASSERT_TRUE(impl.ok());
    const Status st =
        (*impl)->do_kv_cache_update(o.key, o.value, TensorView(), o.meta.slot_mapping, o.scales);
    EXPECT_EQ(st.ok(), type == AttentionType::kEncoderOnly) << st.to_string();
  }
}

CaseSpec encoder_batch(std::string name, uint64_t seed) {
  CaseSpec s = small_case(std::move(name), seed, {1, 7, 128, 300, 45, 513});
  s.causal = false;
  return s;
}

TEST(FlashInferCacheless, EncoderOnlyWithoutCache) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  expect_cacheless_matches_oracle(encoder_batch("encoder_only_bf16", 11),
                                  AttentionType::kEncoderOnly);
  CaseSpec s = encoder_batch("encoder_f16_gqa_window_softcap", 12);
  s.dtype = DType::kF16;
  s.num_heads = 28;
  s.num_kv_heads = 4;
  s.sliding_window = SlidingWindow{31, 31};
  s.logits_soft_cap = 20.0;
  expect_cacheless_matches_oracle(s, AttentionType::kEncoder);
  s = encoder_batch("encoder_only_alibi_sinks", 13);
  s.alibi = true;
  s.sinks = true;
  expect_cacheless_matches_oracle(s, AttentionType::kEncoderOnly);
}

// A causal step does not make an encoder layer causal (vLLM runs it with causal=False).
TEST(FlashInferCacheless, EncoderLayerIsBidirectionalInACausalStep) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s = encoder_batch("causal_step_without_cache", 14);
  s.causal = true;
  s.query_lens = {9, 1, 250};  // the first is no decode: every request is a prefill
  s.seq_lens = s.query_lens;
  for (const AttentionType type : {AttentionType::kEncoder, AttentionType::kEncoderOnly}) {
    ManualStep step(s, type, "FLASHINFER", Device::cuda(0));
    ASSERT_TRUE(step.ready());
    const Status st = step.run(StepCache::kNone, /*with_new_tokens=*/true);
    ASSERT_TRUE(st.ok()) << st.to_string();
    std::vector<uint8_t> bytes = step.output_bytes();
    const int64_t shape[] = {s.num_tokens(), s.num_heads, s.head_size};
    const TensorView out(bytes.data(), s.dtype, Device::cpu(), shape);
    const reference::Comparison c = compare_with_mask(s, KVCacheLayout::kNHD, out, false);
    EXPECT_TRUE(c.pass) << attention_type_name(type) << ": " << c.detail;
    EXPECT_FALSE(compare_with_mask(s, KVCacheLayout::kNHD, out, true).pass);
  }
}

// CPU_ATTN runs encoder-only attention without a cache the same way (on the host: no GPU needed).
TEST(FlashInferCacheless, CpuParityEncoderOnlyWithoutCache) {
  CaseSpec s = encoder_batch("cpu_encoder_only", 18);
  s.query_lens = s.seq_lens = {3, 40, 129};
  expect_cacheless_matches_oracle(s, AttentionType::kEncoderOnly, "CPU_ATTN", Device::cpu());
  const CachelessRun r = run_without_cache(s, AttentionType::kDecoder, "CPU_ATTN", Device::cpu());
  EXPECT_EQ(r.forward.code(), StatusCode::kInvalidArgument) << r.forward.to_string();
}

TEST(FlashInferCacheless, WithoutCacheRefusesWhatNeedsOne) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s = encoder_batch("context_without_cache", 15);
  s.query_lens = {10, 20};
  s.seq_lens = {10, 60};
  CachelessRun r = run_without_cache(s, AttentionType::kEncoderOnly);
  EXPECT_EQ(r.forward.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.forward.message().find("request 1 has 40 tokens of context"), std::string::npos)
      << r.forward.to_string();

  r = run_without_cache(encoder_batch("decoder_without_cache", 16), AttentionType::kDecoder);
  EXPECT_EQ(r.forward.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.forward.message().find("only encoder and encoder-only"), std::string::npos)
      << r.forward.to_string();

  s = encoder_batch("decodes_without_cache", 17);
  s.causal = true;
  s.query_lens = {1, 1, 1};
  s.seq_lens = s.query_lens;
  r = run_without_cache(s, AttentionType::kEncoderOnly);
  EXPECT_EQ(r.forward.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.forward.message().find("3 requests run as decodes"), std::string::npos)
      << r.forward.to_string();

  ManualStep step(encoder_batch("unaligned_without_cache", 21), AttentionType::kEncoderOnly,
                  "FLASHINFER", Device::cuda(0));
  ASSERT_TRUE(step.ready());
  const TensorView skewed = step.unaligned_new_tokens();
  const Status st = step.run(StepCache::kNone, skewed, skewed);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("16-byte aligned"), std::string::npos) << st.to_string();
}

}  // namespace
}  // namespace pagedattn::test
