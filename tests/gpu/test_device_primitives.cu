// Device primitives against their host definitions: FP8 encode/decode bit-exact with
// src/common/numeric.h for every code and a sweep of floats, and the softmax-state merge.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/numeric.h"
#include "cuda_test_support.h"
#include "device/fp8.cuh"
#include "device/softmax_state.cuh"

namespace pagedattn::test {
namespace {

using device::Fp8Format;

template <Fp8Format kF>
__global__ void decode_all(float* as_float, uint16_t* as_f16, uint16_t* as_bf16) {
  const int i = threadIdx.x;  // 256 codes
  as_float[i] = device::fp8_to_float<kF>(static_cast<uint8_t>(i));
  const uint16_t pair = static_cast<uint16_t>(i | (i << 8));
  const uint32_t h = device::fp8x2_to_half2<__half, kF>(pair);
  const uint32_t b = device::fp8x2_to_half2<__nv_bfloat16, kF>(pair);
  as_f16[i] = static_cast<uint16_t>(h & 0xFFFF);
  as_bf16[i] = static_cast<uint16_t>(b >> 16);
}

template <Fp8Format kF>
__global__ void encode_all(const float* x, uint8_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = device::float_to_fp8<kF>(x[i]);
}

bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

template <Fp8Format kF>
void check_decode(float (*host)(uint8_t)) {
  float* f;
  uint16_t *h, *b;
  PAGEDATTN_EXPECT_CUDA_OK(cudaMalloc(&f, 256 * 4));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMalloc(&h, 256 * 2));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMalloc(&b, 256 * 2));
  decode_all<kF><<<1, 256>>>(f, h, b);
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> fs(256);
  std::vector<uint16_t> hs(256), bs(256);
  cudaMemcpy(fs.data(), f, 256 * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(hs.data(), h, 256 * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(bs.data(), b, 256 * 2, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 256; ++i) {
    const float want = host(static_cast<uint8_t>(i));
    EXPECT_TRUE(same_float(fs[i], want)) << "code " << i << ": " << fs[i] << " vs " << want;
    EXPECT_TRUE(same_float(f16_bits_to_float(hs[i]), want)) << "f16 code " << i;
    EXPECT_TRUE(same_float(bf16_bits_to_float(bs[i]), want)) << "bf16 code " << i;
  }
  cudaFree(f);
  cudaFree(h);
  cudaFree(b);
}

template <Fp8Format kF>
void check_encode(uint8_t (*host)(float)) {
  std::vector<float> xs;
  for (int i = 0; i < 256; ++i) {  // every code, its neighbours and the midpoints between codes
    const float v = (kF == Fp8Format::kE4M3 ? fp8_e4m3_to_float : fp8_e5m2_to_float)(
        static_cast<uint8_t>(i));
    const float w = (kF == Fp8Format::kE4M3 ? fp8_e4m3_to_float : fp8_e5m2_to_float)(
        static_cast<uint8_t>(i + 1));
    xs.insert(xs.end(), {v, std::nextafter(v, 0.0f), std::nextafter(v, 1e30f), (v + w) / 2});
  }
  xs.insert(xs.end(), {INFINITY, -INFINITY, NAN, -NAN, 1e30f, -1e30f, 0.0f, -0.0f, 1e-30f});
  uint32_t state = 12345;
  for (int i = 0; i < 4096; ++i) {
    state = state * 1664525u + 1013904223u;
    xs.push_back(std::ldexp(static_cast<float>(state >> 8) / (1 << 24) - 0.5f,
                            static_cast<int>(state % 40) - 20));
  }
  const int n = static_cast<int>(xs.size());
  float* x;
  uint8_t* out_dev;
  PAGEDATTN_EXPECT_CUDA_OK(cudaMalloc(&x, n * 4));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMalloc(&out_dev, n));
  cudaMemcpy(x, xs.data(), n * 4, cudaMemcpyHostToDevice);
  encode_all<kF><<<(n + 255) / 256, 256>>>(x, out_dev, n);
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> out(n);
  cudaMemcpy(out.data(), out_dev, n, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n && bad < 10; ++i) {
    if (out[i] != host(xs[i])) {
      ++bad;
      ADD_FAILURE() << "x = " << xs[i] << ": device " << int(out[i]) << " host "
                    << int(host(xs[i]));
    }
  }
  cudaFree(x);
  cudaFree(out_dev);
}

TEST(DevicePrimitives, Fp8DecodeMatchesHost) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  check_decode<Fp8Format::kE4M3>(fp8_e4m3_to_float);
  check_decode<Fp8Format::kE5M2>(fp8_e5m2_to_float);
}

TEST(DevicePrimitives, Fp8EncodeMatchesHost) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  check_encode<Fp8Format::kE4M3>(float_to_fp8_e4m3);
  check_encode<Fp8Format::kE5M2>(float_to_fp8_e5m2);
}

// The merge math is __host__ __device__: check it on the host against direct sums.
TEST(DevicePrimitives, SoftmaxStateMerge) {
  const float lse_a = 2.0f, lse_b = 3.5f;
  const device::MergeWeights w = device::merge_weights(lse_a, lse_b);
  EXPECT_NEAR(w.w_a + w.w_b, 1.0f, 1e-6f);
  EXPECT_NEAR(w.w_a / w.w_b, std::exp(lse_a - lse_b), 1e-6f);
  EXPECT_NEAR(w.lse, std::log(std::exp(lse_a) + std::exp(lse_b)), 1e-5f);
  const device::MergeWeights empty = device::merge_weights(-INFINITY, INFINITY);
  EXPECT_EQ(empty.w_a, 1.0f);
  EXPECT_EQ(empty.w_b, 0.0f);
  EXPECT_TRUE(std::isinf(empty.lse) && empty.lse < 0);
  EXPECT_EQ(device::merge_weights(INFINITY, 1.0f).w_b, 1.0f);
  device::LseAccumulator acc;
  for (float l : {1.0f, -INFINITY, 4.0f, 2.5f}) acc.add(l);
  const double want = std::log(std::exp(1.0) + std::exp(4.0) + std::exp(2.5));
  EXPECT_NEAR(acc.lse(), want, 1e-5);
  EXPECT_NEAR(acc.weight(4.0f), std::exp(4.0 - want), 1e-6);
  EXPECT_EQ(acc.weight(-INFINITY), 0.0f);
  device::LseAccumulator none;
  none.add(-INFINITY);
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(std::isinf(none.lse()) && none.lse() < 0);
}

}  // namespace
}  // namespace pagedattn::test
