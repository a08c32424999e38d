// dequantize_fp8_query on the host: each element the e4m3 value times its scale, rounded once
// (NaN and -0 kept), for no scale, one scale and one per (request, KV head) over uneven requests
// and padding tokens, from strided and transposed views; and each validation rule.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "pagedattn/ops.h"
#include "support/fp8_query_case.h"
#include "testing/host_batch.h"

namespace pagedattn {
namespace {

using testing::Fp8QueryCase;
using testing::Fp8QueryScale;
using testing::HostTensor;

// Runs the op over c's query and returns the failures (up to 5 reported).
int run_and_compare(Fp8QueryCase& c, bool transposed_output) {
  const Device cpu = Device::cpu();
  const std::vector<int64_t> shape = {c.tokens, c.heads, c.head_size};
  const std::vector<int64_t> query_strides = {c.token_stride(), c.head_size, 1};
  const TensorView query(c.query.data(), DType::kFP8E4M3, cpu, shape, query_strides);
  // A transposed output: [T, H, D] over memory laid out [H, T, D].
  HostTensor out_storage(c.out_dtype, {c.tokens * c.heads * c.head_size});
  std::vector<int64_t> strides = {c.heads * c.head_size, c.head_size, 1};
  if (transposed_output) strides = {c.head_size, c.tokens * c.head_size, 1};
  const TensorView out(out_storage.view().data(), c.out_dtype, cpu, shape, strides);
  TensorView scale, cu;
  if (c.scale_kind == Fp8QueryScale::kPerTensor)
    scale = TensorView(c.scale.data(), DType::kF32, cpu, {1});
  if (c.scale_kind == Fp8QueryScale::kPerRequest) {
    scale = TensorView(c.scale.data(), DType::kF32, cpu, {c.num_reqs(), c.kv_heads});
    cu = TensorView(c.cu_seqlens_q.data(), DType::kI32, cpu, {c.num_reqs() + 1});
  }
  const Status st = dequantize_fp8_query(out, query, scale, cu);
  EXPECT_TRUE(st.ok()) << st.to_string();
  int failures = 0;
  for (int64_t t = 0; t < c.tokens; ++t) {
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t i = 0; i < c.head_size; ++i) {
        const float have =
            load_as_float(out.data(), c.out_dtype, t * strides[0] + h * strides[1] + i);
        const float want = c.expected(t, h, i);
        if (!testing::same_value(have, want) && failures++ < 5) {
          ADD_FAILURE() << "(" << t << ", " << h << ", " << i << "): " << have << " vs " << want;
        }
      }
    }
  }
  return failures;
}

TEST(DequantizeFp8Query, EachScaleKindOnTheHost) {
  for (Fp8QueryScale kind :
       {Fp8QueryScale::kNone, Fp8QueryScale::kPerTensor, Fp8QueryScale::kPerRequest}) {
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      Fp8QueryCase c(53, 6, 40, 2, kind, 24, dtype,
                     static_cast<uint32_t>(static_cast<int>(kind) * 7 + (dtype == DType::kF16)));
      EXPECT_EQ(run_and_compare(c, /*transposed_output=*/dtype == DType::kF16), 0);
    }
  }
}

TEST(DequantizeFp8Query, RefusesWhatItCannotServe) {
  const Device cpu = Device::cpu();
  std::vector<uint8_t> q(4 * 4 * 8);
  std::vector<uint16_t> out(4 * 4 * 8);
  std::vector<float> scale(3 * 2, 1.0f);
  std::vector<int32_t> cu = {0, 1, 3, 4};
  const TensorView query(q.data(), DType::kFP8E4M3, cpu, {4, 4, 8});
  const TensorView output(out.data(), DType::kBF16, cpu, {4, 4, 8});
  const TensorView per_req(scale.data(), DType::kF32, cpu, {3, 2});
  const TensorView starts(cu.data(), DType::kI32, cpu, {4});
  EXPECT_TRUE(dequantize_fp8_query(output, query, per_req, starts).ok());
  const auto refused = [](const Status& s, const char* names) {
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.to_string().find(names), std::string::npos) << s.to_string();
  };
  refused(dequantize_fp8_query(TensorView(out.data(), DType::kBF16, cpu, {4, 4, 8}),
                               TensorView(out.data(), DType::kBF16, cpu, {4, 4, 8})),
          "query");
  refused(dequantize_fp8_query(TensorView(out.data(), DType::kI32, cpu, {4, 4, 8}), query),
          "output");
  refused(dequantize_fp8_query(TensorView(out.data(), DType::kBF16, cpu, {4, 4, 4}), query),
          "output");
  refused(dequantize_fp8_query(output, query, per_req), "cu_seqlens_q");
  refused(dequantize_fp8_query(output, query, TensorView(scale.data(), DType::kF32, cpu, {2, 3}),
                               TensorView(cu.data(), DType::kI32, cpu, {3})),
          "scale");
  refused(
      dequantize_fp8_query(output, query, per_req, TensorView(cu.data(), DType::kI32, cpu, {3})),
      "cu_seqlens_q");
  std::vector<int32_t> decreasing = {0, 3, 1, 4};
  refused(dequantize_fp8_query(output, query, per_req,
                               TensorView(decreasing.data(), DType::kI32, cpu, {4})),
          "cu_seqlens_q[2]");
}

}  // namespace
}  // namespace pagedattn
