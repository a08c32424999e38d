// The Hopper primitives (src/device/wgmma.cuh, tma.cuh, mbarrier.cuh, warp_specialize.cuh) on an
// sm_90 device: wgmma (N 64 and 128) in its SS and RS forms, K-major and MN-major B, bf16 and f16,
// against mma.sync on the same inputs and a float64 product; the e4m3 forms (k32) against float64,
// with the FP8 kernel's P·V operands (P packed from accumulators, Vᵀ from the pre-pass),
// e4m3 packing against the host encoder;
// TMA boxes of a paged-cache-shaped tensor (swizzle, a size-1 box dimension, zeros outside) across
// mbarrier phases; and a warp-specialised producer/consumer ring with register reallocation. Built
// for sm_90a only (tests/hopper.cmake).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "common/numeric.h"
#include "cuda_test_support.h"
#include "device/fp8_wgmma_operands.cuh"
#include "device/mbarrier.cuh"
#include "device/mma.cuh"
#include "device/tma.cuh"
#include "device/warp_specialize.cuh"
#include "device/wgmma.cuh"
#include "kernels/attention/v3/fp8/operands.cuh"
#include "kernels/attention/v3/fp8/traits.cuh"
#include "kernels/attention/v3/fp8/v_transpose.h"
#include "test_v3_support.h"

namespace pagedattn::test {
namespace {

constexpr int kM = 64, kN = 128, kK = 128;  // one m64n128 tile, eight k16 steps

__device__ uint32_t pack16(uint16_t lo, uint16_t hi) {
  return lo | (static_cast<uint32_t>(hi) << 16);
}

// A fragment of rows (16w + g, +8), k step kk, from row-major A [kM][kK].
__device__ void load_a_fragment(const uint16_t* a, int warp, int lane, int kk, uint32_t (&f)[4]) {
  const int r = 16 * warp + lane / 4, k = 16 * kk + 2 * (lane % 4);
  f[0] = pack16(a[r * kK + k], a[r * kK + k + 1]);
  f[1] = pack16(a[(r + 8) * kK + k], a[(r + 8) * kK + k + 1]);
  f[2] = pack16(a[r * kK + k + 8], a[r * kK + k + 9]);
  f[3] = pack16(a[(r + 8) * kK + k + 8], a[(r + 8) * kK + k + 9]);
}

// B element (k, n): B is stored [kN][kK] (K-major) or [kK][kN] (MN-major).
template <bool kMnMajor>
__device__ uint16_t b_at(const uint16_t* b, int k, int n) {
  return kMnMajor ? b[k * kN + n] : b[n * kK + k];
}

// Writes an m64n128 accumulator of warp `warp` in the layout wgmma.cuh describes.
__device__ void store_accumulator(const float (&d)[64], int warp, int lane, float* out) {
  const int r = 16 * warp + lane / 4;
  for (int j = 0; j < 16; ++j) {
    const int c = 8 * j + 2 * (lane % 4);
    out[r * kN + c] = d[4 * j];
    out[r * kN + c + 1] = d[4 * j + 1];
    out[(r + 8) * kN + c] = d[4 * j + 2];
    out[(r + 8) * kN + c + 1] = d[4 * j + 3];
  }
}

// The accumulators of one m64n128 product (d) or two m64n64 halves, set to 1e30: the first k step
// overwrites them (it does not accumulate). Inlined, as wgmma needs the accumulators in registers.
__device__ __forceinline__ void poison_accumulators(float (&d)[64], float (&halves)[2][32]) {
  for (float& x : d) x = 1e30f;
  for (float& x : halves[0]) x = 1e30f;
  for (float& x : halves[1]) x = 1e30f;
}

// Waits for the committed products; the fences keep the accumulators' reads after the wait.
__device__ __forceinline__ void wait_for_accumulators(float (&d)[64], float (&halves)[2][32]) {
  device::wgmma_commit_group();
  device::wgmma_wait_group<0>();
  device::wgmma_fence_operands(d);
  device::wgmma_fence_operands(halves[0]);
  device::wgmma_fence_operands(halves[1]);
}

// One warpgroup computes A * B with wgmma (A from shared memory or registers): one m64n128 product
// or, with kHalves, two m64n64 products over columns 0-63 and 64-127.
template <typename T, bool kMnMajor, bool kARegisters, bool kHalves>
__global__ void wgmma_product(const uint16_t* a, const uint16_t* b, float* out) {
  __shared__ __align__(1024) uint8_t smem[kM * kK * 2 + kN * kK * 2];
  uint8_t* a_s = smem;                // 2 panels of 64 rows
  uint8_t* b_s = smem + kM * kK * 2;  // 2 panels of 128 rows (n, or k when MN-major)
  for (int c = threadIdx.x; c < kM * 16; c += blockDim.x) {
    const int row = c / 16, chunk = c % 16;
    *reinterpret_cast<uint4*>(a_s + (chunk / 8) * 8192 +
                              device::swizzle128_offset(row, chunk % 8)) =
        *reinterpret_cast<const uint4*>(a + row * kK + chunk * 8);
  }
  for (int c = threadIdx.x; c < 128 * 16; c += blockDim.x) {
    const int row = c / 16, chunk = c % 16;
    *reinterpret_cast<uint4*>(b_s + (chunk / 8) * 16384 +
                              device::swizzle128_offset(row, chunk % 8)) =
        *reinterpret_cast<const uint4*>(b + row * 128 + chunk * 8);
  }
  device::fence_proxy_async_shared();
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t frags[8][4];
  if constexpr (kARegisters) {
    for (int kk = 0; kk < 8; ++kk) load_a_fragment(a, warp, lane, kk, frags[kk]);
  }
  float d[64], halves[2][32];
  poison_accumulators(d, halves);
  const uint32_t a_base = device::smem_addr(a_s), b_base = device::smem_addr(b_s);
  // B's columns 64-127: the second panel (MN-major) or rows 64-127 of each panel (K-major).
  const uint32_t second_half = kMnMajor ? 16384 : 8192;
  device::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const uint32_t b_step = kMnMajor ? kk * 2048 : (kk / 4) * 16384 + (kk % 4) * 32;
    const uint32_t lead = kMnMajor ? 16384 : 16;
    const uint64_t db = device::wgmma_desc_sw128(b_base + b_step, lead, 1024);
    const uint64_t db_hi = device::wgmma_desc_sw128(b_base + second_half + b_step, lead, 1024);
    if constexpr (kARegisters && kHalves) {
      device::wgmma_k16_rs<T, kMnMajor>(halves[0], frags[kk], db, kk > 0);
      device::wgmma_k16_rs<T, kMnMajor>(halves[1], frags[kk], db_hi, kk > 0);
    } else if constexpr (kARegisters) {
      device::wgmma_k16_rs<T, kMnMajor>(d, frags[kk], db, kk > 0);
    } else {
      const uint64_t da =
          device::wgmma_desc_sw128(a_base + (kk / 4) * 8192 + (kk % 4) * 32, 16, 1024);
      if constexpr (kHalves) {
        device::wgmma_k16_ss<T, kMnMajor>(halves[0], da, db, kk > 0);
        device::wgmma_k16_ss<T, kMnMajor>(halves[1], da, db_hi, kk > 0);
      } else {
        device::wgmma_k16_ss<T, kMnMajor>(d, da, db, kk > 0);
      }
    }
  }
  wait_for_accumulators(d, halves);
  if constexpr (kHalves) {
    for (int i = 0; i < 64; ++i) d[i] = halves[i / 32][i % 32];  // n8 blocks 0-7, then 8-15
  }
  store_accumulator(d, warp, lane, out);
}

// The same product with mma.sync m16n8k16, fragments read from global memory.
template <typename T, bool kMnMajor>
__global__ void mma_sync_product(const uint16_t* a, const uint16_t* b, float* out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  float d[64] = {};
  for (int kk = 0; kk < 8; ++kk) {
    uint32_t f[4];
    load_a_fragment(a, warp, lane, kk, f);
    for (int j = 0; j < 16; ++j) {
      const int k = 16 * kk + 2 * t, n = 8 * j + g;
      const uint32_t b0 = pack16(b_at<kMnMajor>(b, k, n), b_at<kMnMajor>(b, k + 1, n));
      const uint32_t b1 = pack16(b_at<kMnMajor>(b, k + 8, n), b_at<kMnMajor>(b, k + 9, n));
      float(&dj)[4] = *reinterpret_cast<float(*)[4]>(&d[4 * j]);
      device::mma_16816<T>(dj, f, b0, b1);
    }
  }
  store_accumulator(d, warp, lane, out);
}

template <typename T, bool kMnMajor, bool kARegisters, bool kHalves = false>
void check_wgmma(uint32_t seed) {
  const bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<uint16_t> a(kM * kK), b(kN * kK);
  for (uint16_t& x : a) x = bf16 ? float_to_bf16_bits(dist(rng)) : float_to_f16_bits(dist(rng));
  for (uint16_t& x : b) x = bf16 ? float_to_bf16_bits(dist(rng)) : float_to_f16_bits(dist(rng));
  auto value = [&](uint16_t bits) {
    return static_cast<double>(bf16 ? bf16_bits_to_float(bits) : f16_bits_to_float(bits));
  };
  DeviceArray<uint16_t> a_d(a), b_d(b);
  DeviceArray<float> wg(kM * kN), ref(kM * kN);
  wgmma_product<T, kMnMajor, kARegisters, kHalves><<<1, 128>>>(a_d.get(), b_d.get(), wg.get());
  mma_sync_product<T, kMnMajor><<<1, 128>>>(a_d.get(), b_d.get(), ref.get());
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = wg.to_host(), want = ref.to_host();
  int bad = 0;
  for (int m = 0; m < kM; ++m) {
    for (int n = 0; n < kN; ++n) {
      double exact = 0, magnitude = 0;
      for (int k = 0; k < kK; ++k) {
        const double p = value(a[m * kK + k]) * value(kMnMajor ? b[k * kN + n] : b[n * kK + k]);
        exact += p;
        magnitude += std::fabs(p);
      }
      const double bound = 1e-5 * magnitude;  // f32 sums of 128 exact products, in any order
      const float w = got[m * kN + n], r = want[m * kN + n];
      if ((std::fabs(w - exact) > bound || std::fabs(w - r) > bound) && ++bad <= 5) {
        ADD_FAILURE() << "(" << m << ", " << n << "): wgmma " << w << ", mma.sync " << r
                      << ", exact " << exact;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

// The kernels build one descriptor per product and advance it per k step
// (device::wgmma_desc_advance): that must equal the descriptor built at the advanced address, for
// every 1024-aligned tile base and 16-byte step the 227 KB of shared memory can hold, with the
// leading-byte fields Q·Kᵀ (16) and P·V (the panel strides) use. Host arithmetic: no device.
TEST(HopperPrimitives, DescriptorAdvanceMatchesRebuilt) {
  int bad = 0;
  for (uint32_t lead : {16u, 8192u, 16384u}) {
    for (uint32_t base = 0; base < 227 * 1024; base += 1024) {
      const uint64_t desc = device::wgmma_desc_sw128(base, lead, 1024);
      for (uint32_t offset = 0; base + offset < 227 * 1024; offset += 16) {
        if (device::wgmma_desc_advance(desc, offset) !=
                device::wgmma_desc_sw128(base + offset, lead, 1024) &&
            ++bad <= 5) {
          ADD_FAILURE() << "base " << base << ", offset " << offset << ", leading " << lead;
        }
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(HopperPrimitives, WgmmaSharedOperandsMatchMmaSync) {
  PAGEDATTN_REQUIRE_HOPPER_DEVICE();
  check_wgmma<__nv_bfloat16, false, false>(1);
  check_wgmma<__half, false, false>(2);
  check_wgmma<__nv_bfloat16, true, false>(3);
}

TEST(HopperPrimitives, WgmmaRegisterAMatchesMmaSync) {
  PAGEDATTN_REQUIRE_HOPPER_DEVICE();
  check_wgmma<__nv_bfloat16, true, true>(4);  // the P·V form: P in registers, V MN-major
  check_wgmma<__half, true, true>(5);
  check_wgmma<__nv_bfloat16, false, true>(6);
}

// m64n64: S at head size 256 (SS, K-major) and P·V at head size 64 (RS, MN-major).
TEST(HopperPrimitives, WgmmaN64MatchesMmaSync) {
  PAGEDATTN_REQUIRE_HOPPER_DEVICE();
  check_wgmma<__nv_bfloat16, false, false, true>(7);
  check_wgmma<__nv_bfloat16, true, true, true>(8);
  check_wgmma<__half, true, false, true>(9);
}

// --- FP8 (e4m3) wgmma ---------------------------------------------------------------------------

std::vector<uint8_t> random_e4m3(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<uint8_t> v(n);
  for (uint8_t& x : v) x = float_to_fp8_e4m3(dist(rng));
  return v;
}

// Writes an m64nN accumulator (N = 2 * kRegs) of warp `warp` into out [64][ld] at column col0.
template <int kRegs>
__device__ void store_accumulator_n(const float (&d)[kRegs], int warp, int lane, float* out, int ld,
                                    int col0) {
  const int r = 16 * warp + lane / 4;
  for (int j = 0; j < kRegs / 4; ++j) {
    const int c = col0 + 8 * j + 2 * (lane % 4);
    out[r * ld + c] = d[4 * j];
    out[r * ld + c + 1] = d[4 * j + 1];
    out[(r + 8) * ld + c] = d[4 * j + 2];
    out[(r + 8) * ld + c + 1] = d[4 * j + 3];
  }
}

// A [64][128] e4m3 times B [128 n][128 k] (K-major) with four k32 steps: from shared memory (SS)
// or with A's 8-bit register fragment (RS); one m64n128 product or two m64n64 halves.
template <bool kARegisters, bool kHalves>
__global__ void wgmma_e4m3_product(const uint8_t* a, const uint8_t* b, float* out) {
  __shared__ __align__(1024) uint8_t smem[64 * 128 + 128 * 128];
  uint8_t* a_s = smem;             // one panel of 64 rows
  uint8_t* b_s = smem + 64 * 128;  // one panel of 128 rows
  for (int c = threadIdx.x; c < 192 * 8; c += blockDim.x) {
    const int row = c / 8, chunk = c % 8;
    const uint8_t* from = row < 64 ? a + row * 128 : b + (row - 64) * 128;
    uint8_t* to = row < 64 ? a_s + device::swizzle128_offset(row, chunk)
                           : b_s + device::swizzle128_offset(row - 64, chunk);
    *reinterpret_cast<uint4*>(to) = *reinterpret_cast<const uint4*>(from + chunk * 16);
  }
  device::fence_proxy_async_shared();
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  uint32_t frags[4][4];
  for (int kk = 0; kk < 4; ++kk) {
    for (int r = 0; r < 4; ++r) {
      const int row = 16 * warp + g + 8 * (r % 2), k = 32 * kk + 16 * (r / 2) + 4 * t;
      frags[kk][r] = *reinterpret_cast<const uint32_t*>(a + row * 128 + k);
    }
  }
  float d[64], halves[2][32];
  poison_accumulators(d, halves);
  const uint32_t a_base = device::smem_addr(a_s), b_base = device::smem_addr(b_s);
  device::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint64_t da = device::wgmma_desc_sw128(a_base + 32 * kk, 16, 1024);
    const uint64_t db = device::wgmma_desc_sw128(b_base + 32 * kk, 16, 1024);
    const uint64_t db_hi = device::wgmma_desc_sw128(b_base + 64 * 128 + 32 * kk, 16, 1024);
    if constexpr (kARegisters && kHalves) {
      device::wgmma_k32_e4m3_rs(halves[0], frags[kk], db, kk > 0);
      device::wgmma_k32_e4m3_rs(halves[1], frags[kk], db_hi, kk > 0);
    } else if constexpr (kARegisters) {
      device::wgmma_k32_e4m3_rs(d, frags[kk], db, kk > 0);
    } else if constexpr (kHalves) {
      device::wgmma_k32_e4m3_ss(halves[0], da, db, kk > 0);
      device::wgmma_k32_e4m3_ss(halves[1], da, db_hi, kk > 0);
    } else {
      device::wgmma_k32_e4m3_ss(d, da, db, kk > 0);
    }
  }
  wait_for_accumulators(d, halves);
  if constexpr (kHalves) {
    store_accumulator_n(halves[0], warp, lane, out, 128, 0);
    store_accumulator_n(halves[1], warp, lane, out, 128, 64);
  } else {
    store_accumulator_n(d, warp, lane, out, 128, 0);
  }
}

// |got - exact| within `rel` of the sum of |products| at every element of [m][n]; prints the
// largest ratio seen.
int count_product_errors(const std::vector<float>& got, const std::vector<double>& exact,
                         const std::vector<double>& magnitude, double rel, const char* what) {
  int bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - exact[i]) / (magnitude[i] + 1e-30));
    if (!(std::fabs(got[i] - exact[i]) <= rel * magnitude[i] + 1e-30) && ++bad <= 5) {
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", exact " << exact[i];
    }
  }
  std::printf("%s: largest |error| / sum |products| %.3g\n", what, worst);
  return bad;
}

// The tensor cores' FP8 products are exact; their sums are said to keep fewer bits than f32 (about
// 14), so the bound is 1e-3 of the magnitude: a wrong layout or descriptor is off by O(1).
template <bool kARegisters, bool kHalves>
void check_wgmma_e4m3(uint32_t seed) {
  const std::vector<uint8_t> a = random_e4m3(64 * 128, seed, -3.0f, 3.0f);
  const std::vector<uint8_t> b = random_e4m3(128 * 128, seed + 100, -3.0f, 3.0f);
  DeviceArray<uint8_t> a_d(a), b_d(b);
  DeviceArray<float> out(64 * 128);
  wgmma_e4m3_product<kARegisters, kHalves><<<1, 128>>>(a_d.get(), b_d.get(), out.get());
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  std::vector<double> exact(64 * 128, 0.0), magnitude(64 * 128, 0.0);
  for (int m = 0; m < 64; ++m) {
    for (int n = 0; n < 128; ++n) {
      for (int k = 0; k < 128; ++k) {
        const double p =
            double{fp8_e4m3_to_float(a[m * 128 + k])} * fp8_e4m3_to_float(b[n * 128 + k]);
        exact[m * 128 + n] += p;
        magnitude[m * 128 + n] += std::fabs(p);
      }
    }
  }
  EXPECT_EQ(count_product_errors(out.to_host(), exact, magnitude, 1e-3, "e4m3 wgmma"), 0)
      << "registers " << kARegisters << " halves " << kHalves;
}

TEST(HopperPrimitives, WgmmaE4m3MatchesFloat64) {
  PAGEDATTN_REQUIRE_HOPPER_DEVICE();
  check_wgmma_e4m3<false, false>(11);  // S = Q·Kᵀ's form (D 128)
  check_wgmma_e4m3<false, true>(12);   // N 64: S at D 256
  check_wgmma_e4m3<true, false>(13);   // P·V's form
  check_wgmma_e4m3<true, true>(14);
}

// The FP8 kernel's P·V for head size kD: Vᵀ as the pre-pass wrote it (v3/fp8/v_transpose.h: one
// 128-key image, keys from valid_keys on zeroed, their bytes NaN in the cache) copied into shared
// memory, P [64][kBlockN] floats packed from the accumulator layout by pack_p_fp8, then O [64][kD]
// by the RS wgmma, 128 columns per product.
template <int kD>
__global__ void fp8_pv_product(const float* p, const uint8_t* vt_image, float* out) {
  using S = kernels::attention::v3::PrefillFp8Traits<kD>;
  __shared__ __align__(1024) uint8_t vt_s[S::kVtTileBytes];
  for (int c = threadIdx.x; c < S::kVtTileBytes / 16; c += blockDim.x) {
    reinterpret_cast<uint4*>(vt_s)[c] = reinterpret_cast<const uint4*>(vt_image)[c];
  }
  device::fence_proxy_async_shared();
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float s[S::kScoreRegs];  // P's rows in the accumulator layout
  const int r = 16 * warp + lane / 4;
  for (int j = 0; j < S::kScoreRegs / 4; ++j) {
    const int c = 8 * j + 2 * (lane % 4);
    s[4 * j] = p[r * S::kBlockN + c];
    s[4 * j + 1] = p[r * S::kBlockN + c + 1];
    s[4 * j + 2] = p[(r + 8) * S::kBlockN + c];
    s[4 * j + 3] = p[(r + 8) * S::kBlockN + c + 1];
  }
  uint32_t frags[S::kKeySteps][4];
  kernels::attention::v3::pack_p_fp8(s, frags);
  float o[S::kOChunks][64];
  const uint32_t vt_base = device::smem_addr(vt_s);
  device::wgmma_fence();
#pragma unroll
  for (int c = 0; c < S::kOChunks; ++c) {
#pragma unroll
    for (int kk = 0; kk < S::kKeySteps; ++kk) {
      device::wgmma_k32_e4m3_rs(
          o[c], frags[kk], device::wgmma_desc_sw128(vt_base + c * 128 * 128 + 32 * kk, 16, 1024),
          kk > 0);
    }
  }
  device::wgmma_commit_group();
  device::wgmma_wait_group<0>();
  for (int c = 0; c < S::kOChunks; ++c) {
    device::wgmma_fence_operands(o[c]);
    store_accumulator_n(o[c], warp, lane, out, kD, 128 * c);
  }
}

template <int kD>
void check_fp8_pv(int valid_keys, uint32_t seed) {
  using S = kernels::attention::v3::PrefillFp8Traits<kD>;
  constexpr int kN = S::kBlockN;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.0f, 300.0f);  // P's range (max offset 8)
  std::vector<float> p(64 * kN);
  for (float& x : p) x = dist(rng);
  std::vector<uint8_t> v = random_e4m3(size_t{kN} * kD, seed + 1, -2.0f, 2.0f);
  for (int k = valid_keys; k < kN; ++k) {
    for (int d = 0; d < kD; ++d) v[k * kD + d] = 0x7F;  // NaN: must not reach O
  }
  // The cache: one request of valid_keys keys, one KV head, one page of 128 (K plane unused).
  std::vector<uint8_t> cache(2 * 128 * kD, 0x7F);
  std::copy(v.begin(), v.end(), cache.begin() + 128 * kD);
  DeviceArray<uint8_t> cache_d(cache), image(kD * 128);
  DeviceArray<int32_t> table(std::vector<int32_t>{0}), keys(std::vector<int32_t>{valid_keys});
  kernels::PagedAttentionParams prm;
  prm.k_cache = cache_d.get();
  prm.v_cache = cache_d.get() + 128 * kD;
  prm.cache_dtype = DType::kFP8E4M3;
  prm.fp8_tensor_cores = true;
  prm.cache_block_stride = 2 * 128 * kD;
  prm.cache_token_stride = kD;
  prm.cache_head_stride = kD;
  prm.seqused_k = keys.get();
  prm.block_table = table.get();
  prm.block_table_stride = 1;
  prm.num_reqs = prm.num_kv_heads = 1;
  prm.max_seq_len = valid_keys;
  prm.head_size = kD;
  prm.block_size = 128;
  prm.fp8_workspace = image.get();
  prm.fp8_workspace_bytes = kD * 128;
  const Status st = kernels::attention::v3::launch_fp8_v_transpose(prm, kN, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  DeviceArray<float> p_d(p), out(64 * kD);
  fp8_pv_product<kD><<<1, 128>>>(p_d.get(), image.get(), out.get());
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  std::vector<double> exact(64 * kD, 0.0), magnitude(64 * kD, 0.0);
  for (int m = 0; m < 64; ++m) {
    for (int d = 0; d < kD; ++d) {
      for (int k = 0; k < valid_keys; ++k) {
        const double x = double{fp8_e4m3_to_float(float_to_fp8_e4m3(p[m * kN + k]))} *
                         fp8_e4m3_to_float(v[k * kD + d]);
        exact[m * kD + d] += x;
        magnitude[m * kD + d] += std::fabs(x);
      }
    }
  }
  EXPECT_EQ(count_product_errors(out.to_host(), exact, magnitude, 1e-3, "FP8 P·V"), 0)
      << "D " << kD << " valid keys " << valid_keys;
}

TEST(HopperPrimitives, Fp8PvOperandsFromThePrePass) {
  PAGEDATTN_REQUIRE_HOPPER_DEVICE();
  check_fp8_pv<128>(128, 21);
  check_fp8_pv<128>(77, 22);  // a request's last, partial tile
  check_fp8_pv<256>(64, 23);
  check_fp8_pv<256>(1, 24);
}

__global__ void pack_e4m3(const float* x, int n, uint32_t* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (4 * i < n) out[i] = device::pack_e4m3x4(x[4 * i], x[4 * i + 1], x[4 * i + 2], x[4 * i + 3]);
}

// The hardware conversion against the library's host encoder (RNE, saturating), NaN aside.
TEST(HopperPrimitives, PackE4m3MatchesHostEncoder) {
  PAGEDATTN_REQUIRE_HOPPER_DEVICE();
  std::mt19937 rng(31);
  std::vector<float> x(1 << 16);
  for (size_t i = 0; i < x.size(); ++i) {
    const float mag = std::ldexp(std::uniform_real_distribution<float>(1.0f, 2.0f)(rng),
                                 static_cast<int>(i % 34) - 22);  // subnormals to past 448
    x[i] = (i & 1) ? -mag : mag;
  }
  x[0] = 0.0f, x[1] = -0.0f, x[2] = 448.0f, x[3] = 464.0f, x[4] = 1e30f, x[5] = -INFINITY;
  DeviceArray<float> x_d(x);
  DeviceArray<uint32_t> out(x.size() / 4);
  pack_e4m3<<<static_cast<int>(x.size() / 4 + 255) / 256, 256>>>(
      x_d.get(), static_cast<int>(x.size()), out.get());
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<uint32_t> got = out.to_host();
  int bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const uint8_t g = static_cast<uint8_t>(got[i / 4] >> (8 * (i % 4)));
    if (g != float_to_fp8_e4m3(x[i]) && ++bad <= 5) {
      ADD_FAILURE() << x[i] << ": device " << int{g} << ", host " << int{float_to_fp8_e4m3(x[i])};
    }
  }
  EXPECT_EQ(bad, 0);
}

// --- TMA and mbarrier -------------------------------------------------------------------------

constexpr int kBoxBytes = 128 * 128;  // 128 rows of 64 16-bit elements

// Loads each box (5 coordinates, map order) in turn into one tile, phase i % 2 of one barrier,
// and copies it out un-swizzled: out[i][row][64].
__global__ void tma_boxes(const __grid_constant__ CUtensorMap map, const int32_t* coords, int n,
                          uint16_t* out) {
  __shared__ __align__(1024) uint8_t tile[kBoxBytes];
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) {
    device::mbarrier_init(&bar, 1);
    device::mbarrier_init_fence();
  }
  __syncthreads();
  for (int i = 0; i < n; ++i) {
    if (threadIdx.x == 0) {
      const int32_t c[5] = {coords[5 * i], coords[5 * i + 1], coords[5 * i + 2], coords[5 * i + 3],
                            coords[5 * i + 4]};
      device::mbarrier_arrive_expect_tx(&bar, kBoxBytes);  // out-of-range rows count too
      device::tma_load<5>(tile, &map, c, &bar);
    }
    device::mbarrier_wait(&bar, i & 1);
    for (int c = threadIdx.x; c < 128 * 8; c += blockDim.x) {
      *reinterpret_cast<uint4*>(out + (i * 128 + c / 8) * 64 + (c % 8) * 8) =
          *reinterpret_cast<const uint4*>(tile + device::swizzle128_offset(c / 8, c % 8));
    }
    __syncthreads();  // every read of the tile before the next box overwrites it
  }
}

uint16_t pattern(int64_t i) {
  return static_cast<uint16_t>((i * 2654435761u) >> 13);
}

// An NHD-shaped paged cache [blocks][2][block_size][heads][128]; the map's dimensions go by
// increasing stride (d, head, token, plane, block), so a box is {64, 1, 128, 1, 1}.
TEST(HopperPrimitives, TmaBoxesOfAPagedCacheAcrossPhases) {
  PAGEDATTN_REQUIRE_HOPPER_DEVICE();
  constexpr int kBlocks = 4, kBlockSize = 128, kHeads = 3, kD = 128;
  std::vector<uint16_t> cache(static_cast<size_t>(kBlocks) * 2 * kBlockSize * kHeads * kD);
  for (size_t i = 0; i < cache.size(); ++i) cache[i] = pattern(static_cast<int64_t>(i));
  DeviceArray<uint16_t> cache_d(cache);
  const uint64_t dims[5] = {kD, kHeads, kBlockSize, 2, kBlocks};
  const uint64_t strides[4] = {kD * 2, kHeads * kD * 2, uint64_t{kBlockSize} * kHeads * kD * 2,
                               uint64_t{2} * kBlockSize * kHeads * kD * 2};
  const uint32_t box[5] = {64, 1, 128, 1, 1};
  alignas(64) CUtensorMap map;
  ASSERT_EQ(device::encode_tensor_map_16bit_sw128(&map, cache_d.get(), 5, dims, strides, box),
            CUDA_SUCCESS);
  // {d0, head, token0, plane, block}; the third box's rows 64.. lie past the block: zeros.
  const std::vector<int32_t> coords = {0, 0, 0,  0, 0, 64, 2, 0, 1, 3,
                                       0, 1, 64, 0, 2, 64, 1, 0, 1, 1};
  const int n = static_cast<int>(coords.size() / 5);
  DeviceArray<int32_t> coords_d(coords);
  DeviceArray<uint16_t> out(static_cast<size_t>(n) * 128 * 64);
  tma_boxes<<<1, 128>>>(map, coords_d.get(), n, out.get());
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<uint16_t> got = out.to_host();
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t* c = &coords[5 * i];
    for (int r = 0; r < 128; ++r) {
      for (int e = 0; e < 64; ++e) {
        const int token = c[2] + r;
        const uint16_t want =
            token < kBlockSize
                ? cache[(((static_cast<size_t>(c[4]) * 2 + c[3]) * kBlockSize + token) * kHeads +
                         c[1]) *
                            kD +
                        c[0] + e]
                : 0;
        if (got[(i * 128 + r) * 64 + e] != want && ++bad <= 5) {
          ADD_FAILURE() << "box " << i << " row " << r << " col " << e << ": "
                        << got[(i * 128 + r) * 64 + e] << " vs " << want;
        }
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

// --- Warp specialisation ----------------------------------------------------------------------

// A producer warpgroup (24 -> 40 registers) streams tiles of a [tiles * 128][64] matrix through a
// 2-stage ring; two consumer warpgroups (232 registers) each sum their 64 rows of every tile.
__global__ void __launch_bounds__(384, 1)
    ring_sums(const __grid_constant__ CUtensorMap map, int tiles, float* sums, int* elected) {
  __shared__ __align__(1024) uint8_t stage[2][kBoxBytes];
  __shared__ uint64_t full[2], empty[2];
  const int warp = threadIdx.x / 32, warpgroup = warp / 4;
  if (device::elect_one()) atomicAdd(&elected[warp], 1);
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s) {
      device::mbarrier_init(&full[s], 1);
      device::mbarrier_init(&empty[s], 256);
    }
    device::mbarrier_init_fence();
  }
  __syncthreads();
  if (warpgroup == 0) {
    device::setmaxnreg_dec<40>();
    if (warp == 0 && device::elect_one()) {
      for (int i = 0; i < tiles; ++i) {
        const int s = i % 2;
        device::mbarrier_wait(&empty[s], ((i / 2) & 1) ^ 1);
        device::mbarrier_arrive_expect_tx(&full[s], kBoxBytes);
        const int32_t c[2] = {0, 128 * i};
        device::tma_load<2>(stage[s], &map, c, &full[s]);
      }
    }
  } else {
    device::setmaxnreg_inc<232>();
    const int consumer = warpgroup - 1, tid = threadIdx.x % 128;
    const int row = 64 * consumer + tid / 2, half = tid % 2;
    for (int i = 0; i < tiles; ++i) {
      const int s = i % 2;
      device::mbarrier_wait(&full[s], (i / 2) & 1);
      float acc = 0;
      for (int chunk = 4 * half; chunk < 4 * half + 4; ++chunk) {
        const uint16_t* v =
            reinterpret_cast<const uint16_t*>(stage[s] + device::swizzle128_offset(row, chunk));
        for (int e = 0; e < 8; ++e) acc += v[e];
      }
      device::mbarrier_arrive(&empty[s]);
      atomicAdd(&sums[2 * i + consumer], acc);
    }
  }
}

TEST(HopperPrimitives, WarpSpecializedRingWithRegisterReallocation) {
  PAGEDATTN_REQUIRE_HOPPER_DEVICE();
  constexpr int kTiles = 9;  // odd: both stages see several phases
  std::vector<uint16_t> m(kTiles * 128 * 64);
  for (size_t i = 0; i < m.size(); ++i) m[i] = pattern(static_cast<int64_t>(i)) % 1000;
  DeviceArray<uint16_t> m_d(m);
  const uint64_t dims[2] = {64, kTiles * 128};
  const uint64_t strides[1] = {128};
  const uint32_t box[2] = {64, 128};
  alignas(64) CUtensorMap map;
  ASSERT_EQ(device::encode_tensor_map_16bit_sw128(&map, m_d.get(), 2, dims, strides, box),
            CUDA_SUCCESS);
  DeviceArray<float> sums(2 * kTiles);
  DeviceArray<int> elected(12);
  ring_sums<<<1, 384>>>(map, kTiles, sums.get(), elected.get());
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = sums.to_host();
  for (int i = 0; i < kTiles; ++i) {
    for (int c = 0; c < 2; ++c) {
      double want = 0;
      for (int r = 0; r < 64; ++r) {
        for (int e = 0; e < 64; ++e) want += m[(i * 128 + 64 * c + r) * 64 + e];
      }
      EXPECT_EQ(got[2 * i + c], want) << "tile " << i << " consumer " << c;
    }
  }
  for (int e : elected.to_host()) EXPECT_EQ(e, 1);
}

}  // namespace
}  // namespace pagedattn::test
