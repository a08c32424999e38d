// The FP8 prefill kernel's V transposes (prefill_fp8_operands.cuh) on an sm_90 device, byte for
// byte against a host model of the Vᵀ layout the P·V wgmma reads (row n = head column n, one
// 128-byte-swizzled panel per 128 keys, each 16-key chunk in the order perm): the 32-bit form, the
// ldmatrix form with 32-bit stores and with stmatrix, on four warps and on the split producer's
// three, the stmatrix addresses computed in full or hoisted, for the tiles the kernel builds (128
// keys at D 128, 64 at D 256), whole and a request's last partial tile (the keys past it zero,
// their V bytes NaN). Also the pre-pass that writes the same layout into global memory once per
// launch (prefill_fp8_vt.h), from a paged cache with shuffled pages. Built for sm_90a only
// (tests/hopper.cmake).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_support.h"
#include "device/wgmma.cuh"
#include "kernels/attention/v3/prefill_fp8_operands.cuh"
#include "kernels/attention/v3/prefill_fp8_vt.h"
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

// The pre-pass's images of a paged e4m3 cache (NHD or HND, pages shuffled, every slot a request
// does not use NaN), byte for byte against the same host model: image i of (request, KV head)
// holds keys 128 i .. + 127, those past the request zero. Images past a request's keys are not
// written (the kernel reads none): they keep the workspace's fill.
void check_vt_images(int d, int block_size, bool hnd, uint32_t seed) {
  const std::vector<int> lens = {300, 1, 128, 77, 129};
  const int kv_heads = 3, reqs = static_cast<int>(lens.size());
  const int max_len = *std::max_element(lens.begin(), lens.end());
  const int pages_per_req = (max_len + block_size - 1) / block_size;
  const int num_blocks = reqs * pages_per_req + 2;
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  std::vector<int32_t> table(ids.begin(), ids.begin() + reqs * pages_per_req);
  // Logical [block, K/V, token, head, column] (NHD) or [block, K/V, head, token, column] (HND).
  const int64_t token_stride = hnd ? d : int64_t{kv_heads} * d;
  const int64_t head_stride = hnd ? int64_t{block_size} * d : d;
  const int64_t kv_stride = int64_t{block_size} * kv_heads * d, block_stride = 2 * kv_stride;
  std::vector<uint8_t> cache(num_blocks * block_stride, 0x7F);  // e4m3 NaN
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 0x7E);  // no NaN in the request's keys
  auto v_at = [&](int r, int key, int head, int col) -> uint8_t& {
    const int32_t block = table[r * pages_per_req + key / block_size];
    return cache[block * block_stride + kv_stride + (key % block_size) * token_stride +
                 head * head_stride + col];
  };
  for (int r = 0; r < reqs; ++r) {
    for (int key = 0; key < lens[r]; ++key) {
      for (int h = 0; h < kv_heads; ++h) {
        for (int col = 0; col < d; ++col) v_at(r, key, h, col) = static_cast<uint8_t>(byte(rng));
      }
    }
  }
  DeviceArray<uint8_t> cache_d(cache);
  DeviceArray<int32_t> table_d(table), lens_d(std::vector<int32_t>(lens.begin(), lens.end()));
  kernels::PagedAttentionParams p;
  p.kv_cache = cache_d.get();
  p.cache_dtype = DType::kFP8E4M3;
  p.fp8_tensor_cores = true;
  p.cache_block_stride = block_stride;
  p.cache_kv_stride = kv_stride;
  p.cache_token_stride = token_stride;
  p.cache_head_stride = head_stride;
  p.seqused_k = lens_d.get();
  p.block_table = table_d.get();
  p.block_table_stride = pages_per_req;
  p.num_reqs = reqs;
  p.max_seq_len = max_len;
  p.num_kv_heads = kv_heads;
  p.head_size = d;
  p.block_size = block_size;
  const size_t bytes = kernels::paged_attention_fp8_workspace_bytes(p);
  ASSERT_EQ(bytes, size_t{5} * 3 * kv_heads * d * 128);
  p.fp8_workspace_bytes = bytes - 16;
  DeviceArray<uint8_t> images(bytes);
  p.fp8_workspace = images.get();
  const Status small = v3::launch_fp8_v_transpose(p, nullptr);
  EXPECT_EQ(small.code(), StatusCode::kInvalidArgument) << small.to_string();
  EXPECT_NE(small.to_string().find("fp8_workspace"), std::string::npos) << small.to_string();
  p.fp8_workspace_bytes = bytes;
  cudaMemset(images.get(), 0xA5, bytes);
  const Status st = v3::launch_fp8_v_transpose(p, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<uint8_t> out = images.to_host();
  const int64_t per_req = v3::fp8_vt_images_per_req(p);
  int errors = 0;
  for (int r = 0; r < reqs; ++r) {
    for (int64_t i = 0; i < per_req; ++i) {
      for (int h = 0; h < kv_heads; ++h) {
        const uint8_t* image = out.data() + ((r * per_req + i) * kv_heads + h) * d * 128;
        for (int n = 0; n < d; ++n) {
          for (int group = 0; group < 8; ++group) {
            const uint8_t* chunk = image + device::swizzle128_offset(n, group);
            for (int q = 0; q < 16; ++q) {
              const int key = static_cast<int>(128 * i) + 16 * group + chunk_key(q);
              const bool written = 128 * i < lens[r];
              const uint8_t want = !written ? 0xA5 : key < lens[r] ? v_at(r, key, h, n) : 0;
              if (chunk[q] != want && ++errors <= 5) {
                std::printf("request %d image %lld head %d column %d key %d: 0x%02x, want 0x%02x\n",
                            r, static_cast<long long>(i), h, n, key, chunk[q], want);
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(errors, 0) << "D " << d << ", block " << block_size << (hnd ? ", HND" : ", NHD");
}

TEST(HopperFp8Transpose, PrePassWritesTheVtImages) {
  PAGEDATTN_REQUIRE_HOPPER_DEVICE();
  check_vt_images(128, 128, false, 21);
  check_vt_images(128, 256, true, 22);
  check_vt_images(256, 64, false, 23);
  check_vt_images(256, 128, true, 24);
}

}  // namespace
}  // namespace pagedattn::test
