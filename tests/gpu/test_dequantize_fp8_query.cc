// dequantize_fp8_query on CUDA tensors (the public op, dispatching to the CUDA kernel): every
// element the e4m3 value times its scale, rounded once, exactly as computed on the host, for
// 16-value packs (contiguous and token-strided rows), 8-value packs (head size 40; rows 8 bytes
// apart from 16) and single values (head sizes not a multiple of 8, a head dim with stride 2),
// each scale kind, uneven requests and padding tokens.
#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "pagedattn/ops.h"
#include "runtime/device_buffer.h"
#include "support/fp8_query_case.h"

namespace pagedattn::test {
namespace {

using runtime::DeviceBuffer;
using testing::Fp8QueryCase;
using testing::Fp8QueryScale;

template <typename T>
DeviceBuffer upload(const std::vector<T>& host) {
  StatusOr<DeviceBuffer> buf =
      DeviceBuffer::allocate(0, std::max<size_t>(host.size() * sizeof(T), 16));
  EXPECT_TRUE(buf.ok()) << buf.status().to_string();
  EXPECT_EQ(cudaMemcpy(buf->data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return std::move(*buf);
}

// `dim_stride` 2 puts the query's and the output's elements two apart (the single-value path).
void expect_matches_host(Fp8QueryCase& c, int64_t dim_stride) {
  const Device gpu = Device::cuda(0);
  std::vector<uint8_t> spread(c.query.size() * dim_stride);
  for (size_t i = 0; i < c.query.size(); ++i) spread[i * dim_stride] = c.query[i];
  DeviceBuffer query_buf = upload(spread);
  const int64_t n = c.tokens * c.heads * c.head_size;
  std::vector<uint16_t> poison(n * dim_stride, 0xFFFF);  // NaN in f16 and bf16
  DeviceBuffer out_buf = upload(poison);
  DeviceBuffer scale_buf = upload(c.scale), cu_buf = upload(c.cu_seqlens_q);
  const std::vector<int64_t> shape = {c.tokens, c.heads, c.head_size};
  const std::vector<int64_t> query_strides = {c.token_stride() * dim_stride,
                                              c.head_size * dim_stride, dim_stride};
  const std::vector<int64_t> out_strides = {c.heads * c.head_size * dim_stride,
                                            c.head_size * dim_stride, dim_stride};
  const TensorView query(query_buf.data(), DType::kFP8E4M3, gpu, shape, query_strides);
  const TensorView out(out_buf.data(), c.out_dtype, gpu, shape, out_strides);
  TensorView scale, cu;
  if (c.scale_kind == Fp8QueryScale::kPerTensor)
    scale = TensorView(scale_buf.data(), DType::kF32, gpu, {1});
  if (c.scale_kind == Fp8QueryScale::kPerRequest) {
    scale = TensorView(scale_buf.data(), DType::kF32, gpu, {c.num_reqs(), c.kv_heads});
    cu = TensorView(cu_buf.data(), DType::kI32, gpu, {c.num_reqs() + 1});
  }
  const Status st = dequantize_fp8_query(out, query, scale, cu, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  std::vector<uint16_t> got(n * dim_stride);
  ASSERT_EQ(cudaMemcpy(got.data(), out_buf.data(), got.size() * 2, cudaMemcpyDeviceToHost),
            cudaSuccess);
  int failures = 0;
  for (int64_t t = 0; t < c.tokens; ++t) {
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t i = 0; i < c.head_size; ++i) {
        const int64_t at = ((t * c.heads + h) * c.head_size + i) * dim_stride;
        const float have = load_as_float(got.data(), c.out_dtype, at);
        const float want = c.expected(t, h, i);
        if (!testing::same_value(have, want) && failures++ < 5) {
          ADD_FAILURE() << "(" << t << ", " << h << ", " << i << "): " << have << " vs " << want;
        }
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(DequantizeFp8Query, MatchesTheHostOnTheGpu) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  uint32_t seed = 1;
  for (Fp8QueryScale kind :
       {Fp8QueryScale::kNone, Fp8QueryScale::kPerTensor, Fp8QueryScale::kPerRequest}) {
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      Fp8QueryCase packed(301, 8, 128, 2, kind, 0, dtype, seed++);
      expect_matches_host(packed, 1);
      Fp8QueryCase strided(77, 4, 64, 4, kind, 64, dtype, seed++);
      expect_matches_host(strided, 1);
      Fp8QueryCase eights(29, 4, 40, 2, kind, 0, dtype, seed++);  // 8-value packs: head size
      expect_matches_host(eights, 1);
      Fp8QueryCase rows_at_8(31, 2, 64, 2, kind, 8, dtype, seed++);  // 8-value packs: alignment
      expect_matches_host(rows_at_8, 1);
      Fp8QueryCase odd(45, 6, 36, 3, kind, 0, dtype, seed++);
      expect_matches_host(odd, 1);
      Fp8QueryCase spaced(33, 4, 32, 2, kind, 8, dtype, seed++);
      expect_matches_host(spaced, 2);
    }
  }
}

}  // namespace
}  // namespace pagedattn::test
