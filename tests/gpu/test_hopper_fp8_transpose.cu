// The FP8 prefill kernel's V transposes (prefill_fp8_operands.cuh) on an sm_90 device, byte for
// byte against a host model of the Vᵀ layout the P·V wgmma reads (row n = head column n, one
// 128-byte-swizzled panel per 128 keys, each 16-key chunk in the order perm): the 32-bit form, the
// ldmatrix form with 32-bit stores and with stmatrix, on four warps and on the split producer's
// three, the stmatrix addresses computed in full or hoisted, for the tiles the kernel builds (128
// keys at D 128, 64 at D 256), whole and a request's last partial tile (the keys past it zero,
// their V bytes NaN). Built for sm_90a only (tests/hopper.cmake).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda_test_support.h"
#include "device/wgmma.cuh"
#include "kernels/attention/v3/prefill_fp8_operands.cuh"
#include "test_v3_support.h"

namespace pagedattn::test {
namespace {

namespace v3 = kernels::attention::v3;

// V [kN][kD] (row-major bytes) into shared memory as TMA writes it, transposed once, Vᵀ out.
template <int kD, int kN, bool kLdsm, bool kStsm, int kWarps, bool kHoisted>
__global__ void transpose_tile(const uint8_t* v, int valid_keys, uint8_t* out) {
  using S = v3::PrefillFp8Shape<kD, kN>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* v_s =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  uint8_t* vt_s = v_s + S::kKvTileBytes;  // a multiple of 1024
  for (int c = threadIdx.x; c < kN * kD / 16; c += blockDim.x) {
    const int row = c / (kD / 16), chunk = c % (kD / 16);
    *reinterpret_cast<uint4*>(v_s + (chunk / 8) * S::kKvPanelBytes +
                              device::swizzle128_offset(row, chunk % 8)) =
        *reinterpret_cast<const uint4*>(v + row * kD + chunk * 16);
  }
  for (int i = threadIdx.x; i < S::kVtTileBytes; i += blockDim.x) vt_s[i] = 0xA5;
  __syncthreads();
  if constexpr (!kLdsm) {
    v3::transpose_v_tile<kD>(v_s, vt_s, valid_keys, threadIdx.x);
  } else if (threadIdx.x < 32 * kWarps) {
    if (valid_keys >= kN) {
      v3::transpose_v_tile_ldsm<kD, true, kWarps, kN, kStsm, kHoisted>(v_s, vt_s, valid_keys,
                                                                       threadIdx.x);
    } else {
      v3::transpose_v_tile_ldsm<kD, false, kWarps, kN, kStsm, kHoisted>(v_s, vt_s, valid_keys,
                                                                        threadIdx.x);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < S::kVtTileBytes; i += blockDim.x) out[i] = vt_s[i];
}

// Position q of a 16-key chunk holds key perm(q) (prefill_fp8_operands.cuh).
int chunk_key(int q) {
  return 8 * ((q % 4) / 2) + 2 * (q / 4) + q % 2;
}

template <int kD, int kN, bool kLdsm, bool kStsm, int kWarps, bool kHoisted>
void check_transpose(int valid_keys, uint32_t seed) {
  using S = v3::PrefillFp8Shape<kD, kN>;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> v(size_t{kN} * kD);
  for (uint8_t& x : v) x = static_cast<uint8_t>(byte(rng));
  for (int k = valid_keys; k < kN; ++k) {
    for (int d = 0; d < kD; ++d) v[k * kD + d] = 0x7F;  // e4m3 NaN: must become zero
  }
  DeviceArray<uint8_t> v_d(v), out(S::kVtTileBytes);
  const auto kernel = transpose_tile<kD, kN, kLdsm, kStsm, kWarps, kHoisted>;
  const int smem = S::kKvTileBytes + S::kVtTileBytes + 1024;
  PAGEDATTN_EXPECT_CUDA_OK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kernel<<<1, 128, smem>>>(v_d.get(), valid_keys, out.get());
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<uint8_t> vt = out.to_host();
  int errors = 0;
  for (int n = 0; n < kD; ++n) {
    for (int group = 0; group < kN / 16; ++group) {
      const size_t chunk =
          (group / 8) * size_t{S::kVtPanelBytes} + device::swizzle128_offset(n, group % 8);
      for (int q = 0; q < 16; ++q) {
        const int key = 16 * group + chunk_key(q);
        const uint8_t want = key < valid_keys ? v[key * kD + n] : 0;
        if (vt[chunk + q] != want && ++errors <= 5) {
          std::printf("Vt column %d key %d: 0x%02x, want 0x%02x\n", n, key, vt[chunk + q], want);
        }
      }
    }
  }
  EXPECT_EQ(errors, 0) << "D " << kD << ", " << kN << "-key tile, valid keys " << valid_keys
                       << (kLdsm ? (kStsm ? ", ldmatrix + stmatrix" : ", ldmatrix") : ", 32-bit")
                       << ", " << kWarps << " warps" << (kHoisted ? ", hoisted addresses" : "");
}

// Every form on a whole tile and on a request's last partial one.
template <int kD, int kN, bool kLdsm, bool kStsm, int kWarps, bool kHoisted>
void check_both(int partial_keys, uint32_t seed) {
  check_transpose<kD, kN, kLdsm, kStsm, kWarps, kHoisted>(kN, seed);
  check_transpose<kD, kN, kLdsm, kStsm, kWarps, kHoisted>(partial_keys, seed + 1);
}

TEST(HopperFp8Transpose, EveryFormWritesTheVtLayout) {
  PAGEDATTN_REQUIRE_HOPPER_DEVICE();
  check_both<128, 128, false, false, 4, false>(77, 1);
  check_both<256, 64, false, false, 4, false>(33, 3);
  check_both<128, 128, true, false, 4, false>(77, 5);
  check_both<128, 128, true, true, 4, false>(77, 7);
  check_both<128, 128, true, true, 3, false>(1, 9);
  check_both<128, 128, true, true, 3, true>(100, 10);
  check_both<256, 64, true, false, 3, false>(33, 11);
  check_both<256, 64, true, true, 4, false>(33, 13);
  check_both<256, 64, true, true, 3, false>(63, 15);
  check_both<256, 64, true, true, 3, true>(17, 16);
}

}  // namespace
}  // namespace pagedattn::test
