// merge_attn_states on CUDA tensors (the public op, dispatching to the CUDA kernel) against a
// float64 computation of vLLM's semantics: +inf and -inf both mean empty, two empty sides give the
// prefix output and -inf, tokens at or past prefill_tokens_with_context copy the suffix.
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "runtime/device_buffer.h"
#include "common/numeric.h"
#include "cuda_test_support.h"
#include "pagedattn/ops.h"

namespace pagedattn::test {
namespace {

using runtime::DeviceBuffer;

constexpr float kInf = std::numeric_limits<float>::infinity();

struct MergeCase {
  DType dtype;
  int num_tokens, num_heads, head_size;
  std::optional<int64_t> prefix_tokens;
};
std::string merge_case_name(const MergeCase& c) {
  return std::string(dtype_name(c.dtype)) + "_t" + std::to_string(c.num_tokens) + "_h" +
         std::to_string(c.num_heads) + "_d" + std::to_string(c.head_size) +
         (c.prefix_tokens ? "_prefix_" + std::to_string(*c.prefix_tokens) : "");
}
void PrintTo(const MergeCase& c, std::ostream* os) { *os << merge_case_name(c); }
class MergeStates : public ::testing::TestWithParam<MergeCase> {};

// LSE patterns cycle through: prefix +inf, suffix -inf, both -inf, prefix -inf with suffix +inf,
// and finite values on both sides.
float pattern_lse(int which, int side, std::mt19937& rng) {
  std::normal_distribution<float> n(0.0f, 3.0f);
  switch (which % 7) {
    case 0: return side == 0 ? kInf : n(rng);
    case 1: return side == 0 ? n(rng) : -kInf;
    case 2: return -kInf;
    case 3: return side == 0 ? -kInf : kInf;
    default: return n(rng);
  }
}

TEST_P(MergeStates, MatchesFloat64Semantics) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const MergeCase c = GetParam();
  const int64_t t = c.num_tokens, h = c.num_heads, d = c.head_size, n = t * h * d;
  const int64_t prefix_tokens = c.prefix_tokens.value_or(t);
  std::mt19937 rng(static_cast<uint32_t>(t * 131 + d));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t es = dtype_size(c.dtype);
  std::vector<uint8_t> po(n * es), so(n * es);
  for (int64_t i = 0; i < n; ++i) {
    store_from_float(po.data(), c.dtype, i, normal(rng));
    store_from_float(so.data(), c.dtype, i, normal(rng));
  }
  std::vector<float> pl(h * t), sl(h * t);
  for (int64_t hh = 0; hh < h; ++hh) {
    for (int64_t tt = 0; tt < t; ++tt) {
      const int which = static_cast<int>(hh + tt);
      pl[hh * t + tt] = pattern_lse(which, 0, rng);
      sl[hh * t + tt] = pattern_lse(which, 1, rng);
    }
  }

  std::vector<StatusOr<DeviceBuffer>> bufs;
  for (size_t bytes : {n * es, n * es, n * es, size_t(h * t * 4), size_t(h * t * 4), size_t(h * t * 4)}) {
    bufs.push_back(DeviceBuffer::allocate(0, bytes));
    ASSERT_TRUE(bufs.back().ok()) << bufs.back().status().to_string();
  }
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemcpy(bufs[1]->data(), po.data(), n * es, cudaMemcpyHostToDevice));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemcpy(bufs[2]->data(), so.data(), n * es, cudaMemcpyHostToDevice));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemcpy(bufs[3]->data(), pl.data(), h * t * 4, cudaMemcpyHostToDevice));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemcpy(bufs[4]->data(), sl.data(), h * t * 4, cudaMemcpyHostToDevice));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemset(bufs[0]->data(), 0xFF, n * es));  // NaN poison
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemset(bufs[5]->data(), 0xFF, h * t * 4));
  const Device gpu = Device::cuda(0);
  const TensorView out(bufs[0]->data(), c.dtype, gpu, {t, h, d});
  const TensorView prefix(bufs[1]->data(), c.dtype, gpu, {t, h, d});
  const TensorView suffix(bufs[2]->data(), c.dtype, gpu, {t, h, d});
  const TensorView prefix_lse(bufs[3]->data(), DType::kF32, gpu, {h, t});
  const TensorView suffix_lse(bufs[4]->data(), DType::kF32, gpu, {h, t});
  const TensorView out_lse(bufs[5]->data(), DType::kF32, gpu, {h, t});
  const Status st = merge_attn_states(out, prefix, prefix_lse, suffix, suffix_lse, out_lse,
                                      c.prefix_tokens, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  std::vector<uint8_t> got(n * es);
  std::vector<float> got_lse(h * t);
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemcpy(got.data(), bufs[0]->data(), n * es, cudaMemcpyDeviceToHost));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemcpy(got_lse.data(), bufs[5]->data(), h * t * 4, cudaMemcpyDeviceToHost));

  // One rounding of the dtype, plus float32 weights.
  const double rtol = c.dtype == DType::kBF16 ? 8e-3 : c.dtype == DType::kF16 ? 1e-3 : 1e-5;
  int failures = 0;
  for (int64_t tt = 0; tt < t; ++tt) {
    for (int64_t hh = 0; hh < h; ++hh) {
      double p = pl[hh * t + tt], s = sl[hh * t + tt];
      double wp, ws, lse;
      bool exact_copy = false;
      if (tt >= prefix_tokens) {
        wp = 0.0, ws = 1.0, lse = s, exact_copy = true;
      } else {
        if (std::isinf(p)) p = -INFINITY;
        if (std::isinf(s)) s = -INFINITY;
        const double m = std::max(p, s);
        if (std::isinf(m)) {
          wp = 1.0, ws = 0.0, lse = -INFINITY, exact_copy = true;
        } else {
          const double ep = std::exp(p - m), es2 = std::exp(s - m);
          wp = ep / (ep + es2), ws = es2 / (ep + es2), lse = m + std::log(ep + es2);
        }
      }
      const float have_lse = got_lse[hh * t + tt];
      const bool lse_ok = std::isinf(lse) ? (std::isinf(have_lse) && (have_lse < 0) == (lse < 0))
                                          : std::fabs(have_lse - lse) <= 1e-5 + 1e-6 * std::fabs(lse);
      if (!lse_ok && failures++ < 5) ADD_FAILURE() << "lse (" << hh << ", " << tt << "): " << have_lse << " vs " << lse;
      for (int64_t e = 0; e < d; ++e) {
        const int64_t i = (tt * h + hh) * d + e;
        const double want = wp * load_as_float(po.data(), c.dtype, i) + ws * load_as_float(so.data(), c.dtype, i);
        const double have = load_as_float(got.data(), c.dtype, i);
        const bool ok = exact_copy ? have == want : std::fabs(have - want) <= 1e-6 + rtol * std::fabs(want);
        if (!ok && failures++ < 5) {
          ADD_FAILURE() << "out (" << tt << ", " << hh << ", " << e << "): " << have << " vs " << want;
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, MergeStates,
    ::testing::Values(MergeCase{DType::kBF16, 37, 5, 128, std::nullopt},
                      MergeCase{DType::kF16, 37, 5, 128, 20}, MergeCase{DType::kF32, 19, 3, 64, std::nullopt},
                      MergeCase{DType::kF32, 19, 3, 36, 7},  // 36: not whole 16-byte packs
                      MergeCase{DType::kBF16, 11, 4, 36, 0}, MergeCase{DType::kF16, 129, 8, 256, 128}),
    [](const ::testing::TestParamInfo<MergeCase>& info) { return merge_case_name(info.param); });

}  // namespace
}  // namespace pagedattn::test
