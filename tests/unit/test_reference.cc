// The float64 oracle against hand-computed attention (one and two keys, sinks, soft cap, ALiBi,
// bottom-right causal masks, windows, FP8 scales, both layouts), its input checks, and the pass
// rule of compare_to_reference.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/numeric.h"
#include "pagedattn/kv_cache.h"
#include "reference/attention_ref.h"
#include "reference/compare.h"
#include "testing/host_batch.h"

namespace pagedattn::reference {
namespace {

using testing::HostTensor;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// One request of `seq_len` keys in a single block (block id 1 of 2), one KV head, head size 32:
// key j = unit vector e_(j mod 32) * key_scale, value j = e_j (so out[d] is the weight of key d).
struct TinyCase {
  int seq_len;
  int q_len;
  KVCacheLayout layout = KVCacheLayout::kNHD;
  DType cache_dtype = DType::kF32;
  KVCacheAllocation cache;
  HostTensor query, block_table, seq_lens, qsl;
  AttentionImplParams params;

  TinyCase(int seq, int q, KVCacheLayout l = KVCacheLayout::kNHD, DType dt = DType::kF32)
      : seq_len(seq), q_len(q), layout(l), cache_dtype(dt) {
    cache = KVCacheAllocation::allocate({2, 2, 32, 1, 32}, dt, l, Device::cpu()).value();
    const TensorView& c = cache.view();
    for (int64_t i = 0; i < c.numel(); ++i) store_from_float(c.data(), dt, i, NAN);  // unused
    query = HostTensor(DType::kF32, {q, 1, 32});
    block_table = HostTensor(DType::kI32, {1, 1});
    block_table.data<int32_t>()[0] = 1;
    seq_lens = HostTensor(DType::kI32, {1});
    seq_lens.data<int32_t>()[0] = seq;
    qsl = HostTensor(DType::kI32, {2});
    qsl.data<int32_t>()[0] = 0;
    qsl.data<int32_t>()[1] = q;
    params.num_heads = 1;
    params.num_kv_heads = 1;
    params.head_size = 32;
    params.scale = 1.0f;
    for (int j = 0; j < seq; ++j) {
      for (int d = 0; d < 32; ++d) {
        set(0, j, d, d == j % 32 ? 1.0f : 0.0f);
        set(1, j, d, d == j ? 1.0f : 0.0f);
      }
    }
  }
  void set(int plane, int j, int d, float x) {
    const TensorView& c = cache.view();
    store_from_float(c.data(), cache_dtype,
                     1 * c.stride(0) + plane * c.stride(1) + j * c.stride(2) + d * c.stride(4), x);
  }
  // Query row t: q[d] = scores[d] so that dot(q, key j) = scores[j].
  void set_scores(int t, const std::vector<float>& scores) {
    for (int d = 0; d < 32; ++d)
      query.data<float>()[t * 32 + d] = d < static_cast<int>(scores.size()) ? scores[d] : 0.0f;
  }
  ReferenceInputs inputs(bool causal = true) const {
    ReferenceInputs in;
    in.query = query.view();
    in.kv_cache = cache.view();
    in.block_table = block_table.view();
    in.seq_lens = seq_lens.view();
    in.query_start_loc = qsl.view();
    in.causal = causal;
    return in;
  }
};

TEST(ReferenceTest, OneKeyGivesItsValue) {
  TinyCase c(1, 1);
  c.set_scores(0, {0.7f});
  auto r = reference_attention(c.inputs(), c.params);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_DOUBLE_EQ(r->out[0], 1.0);
  for (int d = 1; d < 32; ++d) EXPECT_EQ(r->out[d], 0.0);
  EXPECT_NEAR(r->lse[0], 0.7, 1e-7);
}

TEST(ReferenceTest, TwoKeysSoftmaxAndLse) {
  TinyCase c(2, 1);
  c.set_scores(0, {1.0f, 3.0f});
  c.params.scale = 0.5f;  // scores 0.5 and 1.5
  auto r = reference_attention(c.inputs(), c.params);
  ASSERT_TRUE(r.ok());
  const double e0 = std::exp(0.5), e1 = std::exp(1.5);
  EXPECT_NEAR(r->out[0], e0 / (e0 + e1), 1e-12);
  EXPECT_NEAR(r->out[1], e1 / (e0 + e1), 1e-12);
  EXPECT_NEAR(r->lse[0], std::log(e0 + e1), 1e-12);
}

TEST(ReferenceTest, SinkJoinsOnlyTheDenominator) {
  TinyCase c(2, 1);
  c.set_scores(0, {1.0f, 2.0f});
  c.params.sinks = {1.5f};
  auto r = reference_attention(c.inputs(), c.params);
  ASSERT_TRUE(r.ok());
  const double e0 = std::exp(1.0), e1 = std::exp(2.0), es = std::exp(1.5);
  EXPECT_NEAR(r->out[0], e0 / (e0 + e1 + es), 1e-12);
  EXPECT_NEAR(r->out[1], e1 / (e0 + e1 + es), 1e-12);
  EXPECT_NEAR(r->lse[0], std::log(e0 + e1 + es), 1e-12);
}

TEST(ReferenceTest, SoftCapThenAlibi) {
  TinyCase c(3, 1);  // the query sits at position 2
  c.set_scores(0, {4.0f, -1.0f, 2.0f});
  c.params.logits_soft_cap = 3.0f;
  c.params.alibi_slopes = {0.25f};
  auto r = reference_attention(c.inputs(), c.params);
  ASSERT_TRUE(r.ok());
  double s[3];
  const double raw[3] = {4.0, -1.0, 2.0};
  for (int j = 0; j < 3; ++j) s[j] = 3.0 * std::tanh(raw[j] / 3.0) - 0.25 * (2 - j);
  const double total = std::exp(s[0]) + std::exp(s[1]) + std::exp(s[2]);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(r->out[j], std::exp(s[j]) / total, 1e-12) << j;
  EXPECT_NEAR(r->lse[0], std::log(total), 1e-12);
}

// With equal scores, out[d] = 1 / |visible| for every visible key d and 0 for the others.
std::vector<int> visible_keys(const ReferenceOutputs& r, int token) {
  std::vector<int> keys;
  for (int d = 0; d < 32; ++d) {
    if (r.out[token * 32 + d] > 0.0) keys.push_back(d);
  }
  return keys;
}

TEST(ReferenceTest, CausalIsBottomRightAligned) {
  TinyCase c(6, 3);  // positions 3, 4, 5
  for (int t = 0; t < 3; ++t) c.set_scores(t, {});
  auto r = reference_attention(c.inputs(), c.params);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(visible_keys(*r, 0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(visible_keys(*r, 2), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_NEAR(r->lse[0], std::log(4.0), 1e-12);
  auto all = reference_attention(c.inputs(/*causal=*/false), c.params);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(visible_keys(*all, 0), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(ReferenceTest, SlidingWindowBothSides) {
  TinyCase c(10, 2);  // positions 8, 9
  c.set_scores(0, {});
  c.set_scores(1, {});
  c.params.sliding_window = {2, 0};  // a decoder window of 3
  auto r = reference_attention(c.inputs(), c.params);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(visible_keys(*r, 0), (std::vector<int>{6, 7, 8}));
  EXPECT_EQ(visible_keys(*r, 1), (std::vector<int>{7, 8, 9}));
  c.params.sliding_window = {1, 1};
  auto both = reference_attention(c.inputs(/*causal=*/false), c.params);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(visible_keys(*both, 0), (std::vector<int>{7, 8, 9}));
  EXPECT_EQ(visible_keys(*both, 1), (std::vector<int>{8, 9}));
}

TEST(ReferenceTest, LayoutsGiveIdenticalResults) {
  TinyCase nhd(20, 4, KVCacheLayout::kNHD), hnd(20, 4, KVCacheLayout::kHND);
  for (int t = 0; t < 4; ++t) {
    std::vector<float> scores;
    for (int j = 0; j < 20; ++j) scores.push_back(std::sin(1.0f + t * 20 + j));
    nhd.set_scores(t, scores);
    hnd.set_scores(t, scores);
  }
  auto a = reference_attention(nhd.inputs(), nhd.params);
  auto b = reference_attention(hnd.inputs(), hnd.params);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->out, b->out);
  EXPECT_EQ(a->lse, b->lse);
}

TEST(ReferenceTest, Fp8CacheIsDequantizedByItsScale) {
  TinyCase c(2, 1, KVCacheLayout::kNHD, DType::kFP8E4M3);
  c.set_scores(0, {1.0f, 1.0f});
  c.set(1, 0, 5, 2.0f);  // value 0 also has 2 at dim 5
  HostTensor k_scale(DType::kF32, {1}), v_scale(DType::kF32, {1});
  k_scale.data<float>()[0] = 0.5f;  // keys read as 0.5 e_j: both scores 0.5
  v_scale.data<float>()[0] = 3.0f;  // values read as 3 e_j, value 0 dim 5 as 6
  ReferenceInputs in = c.inputs();
  in.scales = {k_scale.view(), v_scale.view()};
  auto r = reference_attention(in, c.params);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->out[0], 1.5, 1e-12);
  EXPECT_NEAR(r->out[1], 1.5, 1e-12);
  EXPECT_NEAR(r->out[5], 3.0, 1e-12);
  EXPECT_NEAR(r->lse[0], 0.5 + std::log(2.0), 1e-12);
}

TEST(ReferenceTest, RejectsInconsistentInputs) {
  TinyCase c(4, 2);
  c.block_table.data<int32_t>()[0] = 2;  // the cache has blocks 0 and 1
  auto bad_block = reference_attention(c.inputs(), c.params);
  ASSERT_FALSE(bad_block.ok());
  EXPECT_NE(bad_block.status().message().find("block_table"), std::string::npos);
  c.block_table.data<int32_t>()[0] = 1;
  c.seq_lens.data<int32_t>()[0] = 1;  // shorter than the query
  EXPECT_FALSE(reference_attention(c.inputs(), c.params).ok());
  c.seq_lens.data<int32_t>()[0] = 4;
  c.params.num_kv_heads = 2;
  EXPECT_FALSE(reference_attention(c.inputs(), c.params).ok());
}

TEST(CompareTest, ToleranceTable) {
  EXPECT_EQ(tolerance_for(DType::kF32).atol, 1e-4);
  EXPECT_EQ(tolerance_for(DType::kF16).max_rel_frobenius, 2e-3);
  EXPECT_EQ(tolerance_for(DType::kBF16).atol, 1.5e-2);
  EXPECT_EQ(tolerance_for(DType::kBF16).rtol, 1e-2);
}

TEST(CompareTest, PassAndEachWayToFail) {
  const int64_t t = 3, h = 2, d = 8;
  std::vector<double> ref(t * h * d), ref_lse(h * t);
  HostTensor out(DType::kF32, {t, h, d}), lse(DType::kF32, {h, t});
  for (int64_t i = 0; i < t * h * d; ++i) {
    ref[i] = std::cos(0.3 * i);
    out.data<float>()[i] = static_cast<float>(ref[i]);
  }
  for (int64_t i = 0; i < h * t; ++i) {
    ref_lse[i] = i == 4 ? kNegInf : 0.1 * i;
    lse.data<float>()[i] = static_cast<float>(ref_lse[i]);
  }
  const Tolerance tol = tolerance_for(DType::kF32);
  Comparison ok = compare_to_reference(out.view(), lse.view(), ref, ref_lse, tol);
  EXPECT_TRUE(ok.pass) << ok.detail;

  out.data<float>()[7] += 1e-3f;  // one element past atol + rtol * |ref|
  Comparison elem = compare_to_reference(out.view(), lse.view(), ref, ref_lse, tol);
  EXPECT_FALSE(elem.pass);
  EXPECT_NE(elem.detail.find("dim 7"), std::string::npos) << elem.detail;
  out.data<float>()[7] = static_cast<float>(ref[7]);

  out.data<float>()[9] = NAN;
  EXPECT_FALSE(compare_to_reference(out.view(), lse.view(), ref, ref_lse, tol).pass);
  out.data<float>()[9] = static_cast<float>(ref[9]);

  // Every element inside its own bound but the whole off by more than the Frobenius bound.
  for (int64_t i = 0; i < t * h * d; ++i)
    out.data<float>()[i] = static_cast<float>(ref[i] * (1 + 5e-5));
  Comparison frob = compare_to_reference(out.view(), lse.view(), ref, ref_lse, tol);
  EXPECT_FALSE(frob.pass);
  EXPECT_NE(frob.detail.find("Frobenius"), std::string::npos) << frob.detail;
  for (int64_t i = 0; i < t * h * d; ++i) out.data<float>()[i] = static_cast<float>(ref[i]);

  lse.data<float>()[4] = 0.0f;  // finite where the reference is empty
  EXPECT_FALSE(compare_to_reference(out.view(), lse.view(), ref, ref_lse, tol).pass);
  lse.data<float>()[4] = -INFINITY;
  lse.data<float>()[1] += 0.02f;  // past 1e-2 + 1e-3 * |ref|
  EXPECT_FALSE(compare_to_reference(out.view(), lse.view(), ref, ref_lse, tol).pass);
  // Without an LSE only the output is judged.
  EXPECT_TRUE(compare_to_reference(out.view(), TensorView(), ref, ref_lse, tol).pass);
}

}  // namespace
}  // namespace pagedattn::reference
