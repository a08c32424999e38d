// CPU_ATTN honours or refuses every parameter it is given (docs/parameters.md): each honoured
// one changes the result, each refused one is a Status naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/factories.h"
#include "pagedattn/ops.h"
#include "reference/attention_ref.h"
#include "support/cpu_run.h"
#include "testing/batch_params.h"
#include "testing/host_batch.h"

namespace pagedattn::cpu_test {
namespace {

using testing::CaseSpec;
using testing::HostBatch;

HostBatch make(const CaseSpec& s, KVCacheLayout layout = KVCacheLayout::kNHD) {
  auto b = testing::make_host_batch(s, layout);
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  return std::move(b).value();
}

// Three first prefills (every key is a new token), as an encoder step has.
CaseSpec prefills() {
  CaseSpec s;
  s.seed = 39;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.head_size = 64;
  s.seq_lens = s.query_lens = {12, 30, 5};
  return s;
}

// The run's output and LSE against the oracle of a decoder layer with the mask `causal`, over the
// batch's cache after the run wrote it.
reference::Comparison against_decoder_oracle(const HostBatch& b, const RunResult& r, bool causal) {
  reference::ReferenceInputs in = testing::reference_inputs(b, b.kv_cache.view());
  in.causal = causal;
  const reference::ReferenceOutputs ref = reference::reference_attention(in, b.params).value();
  return reference::compare_to_reference(r.output.view(), r.lse.view(), ref.out, ref.lse,
                                         reference::tolerance_for(b.spec.dtype));
}

// vLLM's FlashAttentionImpl runs encoder and encoder-only layers with causal=False whatever the
// step's metadata says; a decoder layer follows the step.
TEST(CpuParameters, EncoderLayersAreBidirectionalInACausalStep) {
  for (const AttentionType type : {AttentionType::kEncoder, AttentionType::kEncoderOnly}) {
    HostBatch b = make(prefills());
    ASSERT_TRUE(b.spec.causal);
    RunOptions o;
    o.attn_type = type;
    StatusOr<RunResult> r = run_against_reference(b, o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const std::string name(attention_type_name(type));
    EXPECT_TRUE(against_decoder_oracle(b, *r, /*causal=*/false).pass) << name;
    EXPECT_FALSE(against_decoder_oracle(b, *r, /*causal=*/true).pass) << name;
  }
  HostBatch b = make(prefills());
  StatusOr<RunResult> r = run_against_reference(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(against_decoder_oracle(b, *r, /*causal=*/true).pass);
  EXPECT_FALSE(against_decoder_oracle(b, *r, /*causal=*/false).pass);
}

// One step of `b` through CPU_ATTN with the builder made from `bp` and the impl from `ip`: the
// first failing call's Status.
Status run_step(HostBatch& b, const BuilderParams& bp, const AttentionImplParams& ip) {
  auto builder = cpu_attn_backend().make_builder(bp);
  if (!builder.ok()) return builder.status();
  auto impl = cpu_attn_backend().make_impl(ip);
  if (!impl.ok()) return impl.status();
  auto md = (*builder)->build(0, b.metadata());
  if (!md.ok()) return md.status();
  testing::HostTensor out(b.spec.dtype, {b.spec.num_tokens(), b.spec.num_heads, b.spec.head_size});
  PAGEDATTN_RETURN_IF_ERROR((*impl)->do_kv_cache_update(
      b.key.view(), b.value.view(), b.kv_cache.view(), b.slot_mapping.view(), b.scales()));
  return (*impl)->forward(b.query.view(), b.key.view(), b.value.view(), b.kv_cache.view(), **md,
                          out.view(), TensorView(), b.scales());
}

void expect_refused(const Status& s, const std::string& words) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
}

CaseSpec decode_and_chunk() {
  CaseSpec s = prefills();
  s.seq_lens = {40, 70};
  s.query_lens = {1, 9};
  return s;
}

// kv_layout is the layout the impl reads and writes: a cache strided otherwise is refused by the
// cache update and by forward, never read as if it were the other layout.
TEST(CpuParameters, KvLayoutMustMatchTheCacheStrides) {
  HostBatch b = make(decode_and_chunk(), KVCacheLayout::kHND);
  BuilderParams bp = testing::builder_params_for(b.spec, Device::cpu());
  EXPECT_TRUE(run_step(b, bp, b.params).ok());
  AttentionImplParams nhd = b.params;
  nhd.kv_layout = KVCacheLayout::kNHD;
  expect_refused(run_step(b, bp, nhd),
                 "kv_layout = NHD (the layout the impl was made for) but kv_cache");
  auto impl = cpu_attn_backend().make_impl(nhd).value();
  auto md = cpu_attn_backend().make_builder(bp).value()->build(0, b.metadata()).value();
  testing::HostTensor out(b.spec.dtype, {10, 8, 64});
  const Status forward = impl->forward(b.query.view(), b.key.view(), b.value.view(),
                                       b.kv_cache.view(), *md, out.view(), TensorView(), {});
  expect_refused(forward, "is strided HND");
}

// The fields builder and impl both carry (the KV-cache spec, ALiBi, the window) must agree; each
// refusal names the field and both values.
TEST(CpuParameters, BuilderAndImplMustAgree) {
  HostBatch b = make(decode_and_chunk(), KVCacheLayout::kHND);
  const BuilderParams good =
      testing::builder_params_for(b.spec, Device::cpu());
  BuilderParams bp = good;
  bp.dtype = DType::kF16;
  expect_refused(run_step(b, bp, b.params),
                 "dtype = f16 (BuilderParams); this layer has dtype = bf16");
  bp = good;
  bp.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  expect_refused(run_step(b, bp, b.params), "kv_cache_dtype = fp8_e4m3 (BuilderParams)");
  bp = good;
  bp.num_heads = 16;
  expect_refused(run_step(b, bp, b.params), "num_heads = 16 (BuilderParams)");
  bp = good;
  bp.head_size = 128;
  expect_refused(run_step(b, bp, b.params), "head_size = 128 (BuilderParams)");
  bp = good;
  bp.use_alibi = true;
  expect_refused(run_step(b, bp, b.params),
                 "use_alibi = true (BuilderParams); this layer has no alibi_slopes");
  bp = good;
  bp.sliding_window = SlidingWindow{16, 0};
  expect_refused(run_step(b, bp, b.params),
                 "sliding_window = (16, 0) (BuilderParams); this layer "
                 "has sliding_window = (-1, -1)");
  bp = good;
  bp.kv_cache_dtype = KVCacheDType::kBFloat16;  // what auto stores under a bf16 model
  EXPECT_TRUE(run_step(b, bp, b.params).ok());
}

// The limits given to the builder bound every step it builds, as on the GPU backends (whose
// persistent buffers they size); each refusal names the limit.
TEST(CpuParameters, BuilderLimitsBoundTheStep) {
  HostBatch b = make(decode_and_chunk());  // 2 requests, 10 tokens, max_seq_len 70
  const BuilderParams fits =
      testing::builder_params_for(b.spec, Device::cpu());
  BuilderParams bp = fits;
  bp.max_num_reqs = bp.max_num_tokens = bp.max_model_len = 1;
  expect_refused(run_step(b, bp, b.params), "num_reqs = 2 exceeds the builder's max_num_reqs = 1");
  bp = fits;
  bp.max_num_tokens = 9;
  expect_refused(run_step(b, bp, b.params),
                 "num_actual_tokens = 10 exceeds the builder's max_num_tokens = 9");
  bp = fits;
  bp.max_model_len = 69;
  expect_refused(run_step(b, bp, b.params),
                 "max_seq_len = 70 exceeds the builder's max_model_len = 69");
  bp.max_num_reqs = 2;
  bp.max_num_tokens = 10;
  bp.max_model_len = 70;
  EXPECT_TRUE(run_step(b, bp, b.params).ok());
  bp.max_model_len = 0;
  expect_refused(run_step(b, bp, b.params), "max_model_len = 0 must be positive");
}

// num_sms sizes a GPU builder's plans; CPU_ATTN has none to size, so a count is refused.
TEST(CpuParameters, NumSmsIsRefused) {
  BuilderParams bp = testing::builder_params_for(prefills(), Device::cpu());
  EXPECT_TRUE(cpu_attn_backend().make_builder(bp).ok());
  bp.num_sms = 132;
  expect_refused(cpu_attn_backend().make_builder(bp).status(),
                 "num_sms = 132: CPU_ATTN plans no GPU work (allowed: 0");
}

// CPU_ATTN never splits a request's keys: every bound holds and changes nothing; a negative one is
// refused.
TEST(CpuParameters, MaxNumSplitsIsABound) {
  BuilderParams bp = testing::builder_params_for(prefills(), Device::cpu());
  for (const int bound : {1, 4}) {
    bp.max_num_splits = bound;
    EXPECT_TRUE(cpu_attn_backend().make_builder(bp).ok()) << bound;
  }
  bp.max_num_splits = -1;
  expect_refused(cpu_attn_backend().make_builder(bp).status(), "max_num_splits = -1 (allowed: 0");
}

// A GPU kernel generation forced on CPU_ATTN, which has one (cpu), is refused, not ignored.
TEST(CpuParameters, KernelGenerationIsRefused) {
  AttentionImplParams p = make(prefills()).params;
  EXPECT_TRUE(cpu_attn_backend().make_impl(p).ok());
  for (const int generation : {2, 3}) {
    p.kernel_generation = generation;
    const Status s = cpu_attn_backend().make_impl(p).status();
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.to_string();
    EXPECT_NE(s.message().find("kernel_generation = " + std::to_string(generation) +
                               " is not served by CPU_ATTN (allowed: 0"),
              std::string::npos)
        << s.message();
  }
}

// fp8_tensor_cores permits the GPU backends' FP8 tensor cores (an accuracy trade CPU_ATTN has no
// use for): over an e4m3 cache the result is the same bytes with it or without.
TEST(CpuParameters, Fp8TensorCoresChangeNothing) {
  CaseSpec s = decode_and_chunk();
  s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  std::vector<std::vector<uint8_t>> outputs;
  for (const bool permitted : {false, true}) {
    HostBatch b = make(s);
    b.params.fp8_tensor_cores = permitted;
    StatusOr<RunResult> r = run_against_reference(b);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(r->comparison.pass) << r->comparison;
    const auto* bytes = static_cast<const uint8_t*>(r->output.view().data());
    outputs.emplace_back(bytes, bytes + r->output.view().nbytes());
  }
  EXPECT_EQ(outputs[0], outputs[1]);
}

// A deterministic builder runs no cascade (whether a step has a shared prefix depends on the rest
// of the batch): its rule never asks for one, and build() refuses one, naming deterministic.
// (CPU_ATTN's rule declines these 256 shared keys either way: they fit the last-level cache.)
TEST(CpuParameters, DeterministicBuildersRunNoCascade) {
  CaseSpec s = prefills();
  s.seq_lens = {300, 280, 270, 400, 260, 290, 300, 310};
  s.query_lens = {40, 1, 1, 9, 1, 2, 1, 3};
  s.common_prefix_len = 256;
  HostBatch b = make(s);
  BuilderParams bp = testing::builder_params_for(s, Device::cpu());
  const std::vector<int32_t> q(s.query_lens.begin(), s.query_lens.end());
  ASSERT_TRUE(cascade_attention_pays_off(256, q, 8, 2, false, false, false, 2, 1));
  for (const bool deterministic : {false, true}) {
    bp.deterministic = deterministic;
    auto builder = cpu_attn_backend().make_builder(bp).value();
    EXPECT_FALSE(builder->use_cascade_attention(256, q, 8, 2, false, false, false, 2, 1));
    const auto built = builder->build(256, b.metadata());
    EXPECT_EQ(built.ok(), !deterministic);
    if (deterministic) {
      expect_refused(built.status(), "common_prefix_len = 256: CPU_ATTN was built deterministic");
    }
  }
}

// BuilderParams::deterministic asks for batch invariance, which CPU_ATTN gives either way: each
// query row is computed on its own, over its keys in order, whatever else the batch holds.
TEST(CpuParameters, OutputsAreBatchInvariantEitherWay) {
  std::vector<std::vector<uint8_t>> firsts;
  for (const bool deterministic : {false, true}) {
    for (const std::vector<int>& rest : {std::vector<int>{}, {300, 7, 1000}, {5}}) {
      CaseSpec s = prefills();
      s.seq_lens = {700};
      s.query_lens = {40};
      for (const int len : rest) {
        s.seq_lens.push_back(len);
        s.query_lens.push_back(std::min(len, 33));
      }
      HostBatch b = make(s);
      BuilderParams bp = testing::builder_params_for(s, Device::cpu());
      bp.deterministic = deterministic;
      auto builder = cpu_attn_backend().make_builder(bp).value();
      auto impl = cpu_attn_backend().make_impl(b.params).value();
      ASSERT_TRUE(impl->do_kv_cache_update(b.key.view(), b.value.view(), b.kv_cache.view(),
                                           b.slot_mapping.view(), b.scales())
                      .ok());
      auto md = builder->build(0, b.metadata()).value();
      testing::HostTensor out(s.dtype, {s.num_tokens(), s.num_heads, s.head_size});
      ASSERT_TRUE(impl->forward(b.query.view(), b.key.view(), b.value.view(), b.kv_cache.view(),
                                *md, out.view(), TensorView(), b.scales())
                      .ok());
      const auto* bytes = static_cast<const uint8_t*>(out.view().data());
      firsts.emplace_back(bytes, bytes + 40 * s.num_heads * s.head_size * dtype_size(s.dtype));
    }
  }
  for (size_t i = 1; i < firsts.size(); ++i) EXPECT_EQ(firsts[i], firsts[0]) << "run " << i;
}

}  // namespace
}  // namespace pagedattn::cpu_test
