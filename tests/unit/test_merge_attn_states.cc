// merge_attn_states on the host: vLLM's semantics over a sample of the grid of vLLM's
// test_merge_attn_states.py, with +-inf LSEs sprinkled, the prefill_tokens_with_context split,
// both-empty rows, strided views, and each validation rule.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "common/numeric.h"
#include "pagedattn/config.h"
#include "pagedattn/ops.h"
#include "testing/host_batch.h"

namespace pagedattn {
namespace {

using testing::HostTensor;
constexpr float kInf = std::numeric_limits<float>::infinity();

struct MergeInputs {
  int64_t tokens, heads, dim;
  DType dtype;
  HostTensor prefix_out, suffix_out, output;
  HostTensor prefix_lse, suffix_lse, output_lse;

  MergeInputs(int64_t t, int64_t h, int64_t d, DType dt, uint32_t seed)
      : tokens(t),
        heads(h),
        dim(d),
        dtype(dt),
        prefix_out(dt, {t, h, d}),
        suffix_out(dt, {t, h, d}),
        output(dt, {t, h, d}),
        prefix_lse(DType::kF32, {h, t}),
        suffix_lse(DType::kF32, {h, t}),
        output_lse(DType::kF32, {h, t}) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    std::uniform_real_distribution<float> uniform;
    for (int64_t i = 0; i < t * h * d; ++i) {
      store_from_float(prefix_out.view().data(), dt, i, normal(rng));
      store_from_float(suffix_out.view().data(), dt, i, normal(rng));
      store_from_float(output.view().data(), dt, i, NAN);  // poisoned
    }
    // About 10% +inf on each side, never both at one position (as vLLM's test).
    for (int64_t i = 0; i < h * t; ++i) {
      float p = normal(rng), s = normal(rng);
      const float u = uniform(rng);
      if (u < 0.1f)
        p = kInf;
      else if (u < 0.2f)
        s = kInf;
      prefix_lse.data<float>()[i] = p;
      suffix_lse.data<float>()[i] = s;
      output_lse.data<float>()[i] = NAN;
    }
  }
};

struct Tolerance {
  double atol, rtol;
};

// The definition, in double: +-inf LSE = empty side; tokens at or past `split` copy the suffix.
void expect_merged(const MergeInputs& in, int64_t split, bool check_lse) {
  const Tolerance tol = in.dtype == DType::kBF16 ? Tolerance{1e-3, 1e-2} : Tolerance{1e-3, 1e-3};
  int failures = 0;
  for (int64_t t = 0; t < in.tokens && failures < 5; ++t) {
    for (int64_t h = 0; h < in.heads; ++h) {
      double p = in.prefix_lse.data<float>()[h * in.tokens + t];
      double s = in.suffix_lse.data<float>()[h * in.tokens + t];
      if (std::isinf(p)) p = -kInf;
      if (std::isinf(s)) s = -kInf;
      double wp, ws, lse;
      if (t >= split) {
        wp = 0, ws = 1, lse = in.suffix_lse.data<float>()[h * in.tokens + t];
      } else if (std::isinf(std::max(p, s))) {
        wp = 1, ws = 0, lse = -kInf;
      } else {
        const double m = std::max(p, s);
        const double ep = std::exp(p - m), es = std::exp(s - m);
        wp = ep / (ep + es), ws = es / (ep + es), lse = m + std::log(ep + es);
      }
      for (int64_t d = 0; d < in.dim; ++d) {
        const int64_t i = (t * in.heads + h) * in.dim + d;
        const double want = wp * load_as_float(in.prefix_out.view().data(), in.dtype, i) +
                            ws * load_as_float(in.suffix_out.view().data(), in.dtype, i);
        const double got = load_as_float(in.output.view().data(), in.dtype, i);
        if (!(std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want))) {
          ADD_FAILURE() << "token " << t << " head " << h << " dim " << d << ": got " << got
                        << " want " << want;
          ++failures;
          break;
        }
      }
      if (check_lse) {
        const float got = in.output_lse.data<float>()[h * in.tokens + t];
        if (std::isinf(lse)) {
          EXPECT_EQ(got, lse) << "token " << t << " head " << h;
        } else {
          EXPECT_NEAR(got, lse, 1e-5 + 1e-5 * std::fabs(lse)) << "token " << t << " head " << h;
        }
      }
    }
  }
}

struct GridPoint {
  int64_t tokens, heads, dim;
  DType dtype;
  std::optional<int64_t> prefill_tokens_with_context;
};

void PrintTo(const GridPoint& g, std::ostream* os) {
  *os << g.tokens << " tokens, " << g.heads << " heads, D " << g.dim << ", " << dtype_name(g.dtype)
      << ", prefill_tokens_with_context "
      << (g.prefill_tokens_with_context ? std::to_string(*g.prefill_tokens_with_context) : "none");
}

class MergeGrid : public ::testing::TestWithParam<GridPoint> {};

TEST_P(MergeGrid, MatchesDefinition) {
  const GridPoint g = GetParam();
  MergeInputs in(g.tokens, g.heads, g.dim, g.dtype, static_cast<uint32_t>(g.tokens * 31 + g.heads));
  ASSERT_TRUE(merge_attn_states(in.output.view(), in.prefix_out.view(), in.prefix_lse.view(),
                                in.suffix_out.view(), in.suffix_lse.view(), in.output_lse.view(),
                                g.prefill_tokens_with_context)
                  .ok());
  expect_merged(in, g.prefill_tokens_with_context.value_or(g.tokens), /*check_lse=*/true);
}

// vLLM's grid: tokens {256, 512, 613, 1024, 1536, 4096} x heads {4, 8, 16, 32, 48, 64} x
// D {32, 48, 64, 96, 128, 256} x {f32, f16, bf16} x prefill_tokens_with_context {None, 128};
// sampled so that every value of every axis appears.
INSTANTIATE_TEST_SUITE_P(Sample, MergeGrid,
                         ::testing::Values(GridPoint{256, 4, 32, DType::kF32, std::nullopt},
                                           GridPoint{512, 8, 48, DType::kF16, 128},
                                           GridPoint{613, 16, 64, DType::kBF16, std::nullopt},
                                           GridPoint{1024, 32, 96, DType::kF32, 128},
                                           GridPoint{1536, 48, 32, DType::kF16, std::nullopt},
                                           GridPoint{4096, 4, 128, DType::kBF16, 128},
                                           GridPoint{256, 64, 256, DType::kBF16, 128},
                                           GridPoint{613, 8, 256, DType::kF32, 128},
                                           GridPoint{512, 64, 64, DType::kF32, std::nullopt},
                                           GridPoint{1024, 16, 48, DType::kBF16, std::nullopt},
                                           GridPoint{1536, 4, 96, DType::kF16, 128},
                                           GridPoint{4096, 8, 32, DType::kF16, std::nullopt}));

TEST(MergeAttnStatesTest, BothSidesEmptyGivePrefixAndMinusInf) {
  MergeInputs in(5, 3, 32, DType::kF32, 1);
  const float empties[4][2] = {{kInf, kInf}, {-kInf, -kInf}, {kInf, -kInf}, {-kInf, kInf}};
  for (int64_t i = 0; i < 15; ++i) {
    in.prefix_lse.data<float>()[i] = empties[i % 4][0];
    in.suffix_lse.data<float>()[i] = empties[i % 4][1];
  }
  ASSERT_TRUE(merge_attn_states(in.output.view(), in.prefix_out.view(), in.prefix_lse.view(),
                                in.suffix_out.view(), in.suffix_lse.view(), in.output_lse.view())
                  .ok());
  for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(in.output_lse.data<float>()[i], -kInf);
  for (int64_t i = 0; i < 5 * 3 * 32; ++i) {
    ASSERT_EQ(in.output.data<float>()[i], in.prefix_out.data<float>()[i]) << i;
  }
}

TEST(MergeAttnStatesTest, OutputLseIsOptional) {
  MergeInputs in(40, 4, 64, DType::kBF16, 2);
  ASSERT_TRUE(merge_attn_states(in.output.view(), in.prefix_out.view(), in.prefix_lse.view(),
                                in.suffix_out.view(), in.suffix_lse.view())
                  .ok());
  expect_merged(in, in.tokens, /*check_lse=*/false);
}

TEST(MergeAttnStatesTest, PrefillTokensWithContextZeroCopiesTheSuffix) {
  MergeInputs in(17, 2, 40, DType::kF16, 3);
  ASSERT_TRUE(merge_attn_states(in.output.view(), in.prefix_out.view(), in.prefix_lse.view(),
                                in.suffix_out.view(), in.suffix_lse.view(), in.output_lse.view(), 0)
                  .ok());
  for (int64_t i = 0; i < 17 * 2 * 40; ++i) {
    ASSERT_EQ(in.output.data<uint16_t>()[i], in.suffix_out.data<uint16_t>()[i]);
  }
  expect_merged(in, 0, true);
}

TEST(MergeAttnStatesTest, StridedViewsOnTheHost) {
  // Outputs as [T, H, D] views into [T, H + 1, D] buffers (a larger head stride).
  const int64_t t = 9, h = 3, d = 32;
  MergeInputs dense(t, h, d, DType::kF32, 4);
  HostTensor wide_prefix(DType::kF32, {t, h + 1, d}), wide_out(DType::kF32, {t, h + 1, d});
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = 0; j < h * d; ++j) {
      wide_prefix.data<float>()[i * (h + 1) * d + j] =
          dense.prefix_out.data<float>()[i * h * d + j];
    }
  }
  const int64_t shape[] = {t, h, d};
  const int64_t strides[] = {(h + 1) * d, d, 1};
  const TensorView prefix(wide_prefix.view().data(), DType::kF32, Device::cpu(), shape, strides);
  const TensorView out(wide_out.view().data(), DType::kF32, Device::cpu(), shape, strides);
  ASSERT_TRUE(merge_attn_states(out, prefix, dense.prefix_lse.view(), dense.suffix_out.view(),
                                dense.suffix_lse.view(), dense.output_lse.view())
                  .ok());
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = 0; j < h * d; ++j) {
      dense.output.data<float>()[i * h * d + j] = wide_out.data<float>()[i * (h + 1) * d + j];
    }
  }
  expect_merged(dense, t, true);
}

TEST(MergeAttnStatesTest, RejectsBadArguments) {
  MergeInputs in(8, 2, 32, DType::kF32, 5);
  MergeInputs other(8, 2, 32, DType::kF16, 6);
  HostTensor wrong_shape(DType::kF32, {8, 2, 40});
  HostTensor wrong_lse(DType::kF32, {8, 2});
  HostTensor f16_lse(DType::kF16, {2, 8});
  auto merge = [&](const TensorView& out, const TensorView& po, const TensorView& pl,
                   const TensorView& so, const TensorView& sl, const TensorView& ol,
                   std::optional<int64_t> split = std::nullopt) {
    return merge_attn_states(out, po, pl, so, sl, ol, split);
  };
  auto expect_error = [](const Status& s, const char* names) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find(names), std::string::npos) << s.message();
  };
  const auto& o = in.output.view();
  const auto& po = in.prefix_out.view();
  const auto& pl = in.prefix_lse.view();
  const auto& so = in.suffix_out.view();
  const auto& sl = in.suffix_lse.view();
  const auto& ol = in.output_lse.view();
  expect_error(merge(o, wrong_shape.view(), pl, so, sl, ol), "prefix_output");
  expect_error(merge(o, po, pl, other.suffix_out.view(), sl, ol), "suffix_output");
  expect_error(merge(o, po, wrong_lse.view(), so, sl, ol), "prefix_lse");
  expect_error(merge(o, po, pl, so, f16_lse.view(), ol), "suffix_lse");
  expect_error(merge(o, po, pl, so, sl, wrong_lse.view()), "output_lse");
  expect_error(merge(TensorView(), po, pl, so, sl, ol), "output");
  expect_error(merge(o, po, TensorView(), so, sl, ol), "prefix_lse");
  expect_error(merge(o, po, pl, so, sl, ol, 9), "prefill_tokens_with_context");
  expect_error(merge(o, po, pl, so, sl, ol, -1), "prefill_tokens_with_context");
  HostTensor i32(DType::kI32, {8, 2, 32});
  expect_error(merge(i32.view(), i32.view(), pl, i32.view(), sl, ol), "output");
#if !PAGEDATTN_WITH_CUDA
  const TensorView gpu_out(o.data(), DType::kF32, Device::cuda(0), {8, 2, 32});
  const TensorView gpu_po(po.data(), DType::kF32, Device::cuda(0), {8, 2, 32});
  const TensorView gpu_so(so.data(), DType::kF32, Device::cuda(0), {8, 2, 32});
  const TensorView gpu_pl(pl.data(), DType::kF32, Device::cuda(0), {2, 8});
  const TensorView gpu_sl(sl.data(), DType::kF32, Device::cuda(0), {2, 8});
  EXPECT_EQ(merge(gpu_out, gpu_po, gpu_pl, gpu_so, gpu_sl, TensorView()).code(),
            StatusCode::kUnimplemented);
  // Mixed devices are an argument error either way.
  expect_error(merge(o, gpu_po, pl, so, sl, ol), "prefix_output");
#endif
}

}  // namespace
}  // namespace pagedattn
