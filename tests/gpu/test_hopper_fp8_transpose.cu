// The FP8 prefill kernel's Vᵀ on an sm_90 device: the pre-pass that writes it once per launch
// (v3/fp8/v_transpose.h), byte for byte against a host model of the layout the P·V wgmma reads (row
// n = head column n, one 128-byte-swizzled panel per 128 keys, each 16-key chunk in the order perm
// of v3/fp8/operands.cuh), from paged caches with shuffled pages, the slots a request does
// not use NaN, and a workspace too small. Built for sm_90a only (tests/hopper.cmake).
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
#include "kernels/attention/v3/fp8/v_transpose.h"
#include "test_v3_support.h"

namespace pagedattn::test {
namespace {

namespace v3 = kernels::attention::v3;

// Position q of a 16-key chunk holds key perm(q) (v3/fp8/operands.cuh).
int chunk_key(int q) {
  return 8 * ((q % 4) / 2) + 2 * (q / 4) + q % 2;
}

// The pre-pass's images for KV tiles of tile_keys keys, of a paged e4m3 cache (NHD or HND, pages
// shuffled, every slot a request does not use NaN), byte for byte against the host model: image i
// of (request, KV head) holds keys K i .. K i + K - 1 (K = fp8_vt_image_keys: 128), key 16 g +
// perm(q) at byte q of chunk g % 8 of panel g / 8, those past the request zero. Images past a
// request's keys are not written (the kernel reads none): they keep the workspace's fill.
void check_vt_images(int d, int block_size, bool hnd, int tile_keys, uint32_t seed) {
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
  p.k_cache = cache_d.get();
  p.v_cache = cache_d.get() + kv_stride;
  p.cache_dtype = DType::kFP8E4M3;
  p.fp8_tensor_cores = true;
  p.cache_block_stride = block_stride;
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
  ASSERT_EQ(bytes, size_t{5} * 3 * kv_heads * d * 128);  // 300 keys: 3 panels of 128 keys
  const int64_t per_req = v3::fp8_vt_images_per_req(p, tile_keys);
  const int image_keys = v3::fp8_vt_image_keys(tile_keys);
  const int64_t image_bytes = v3::fp8_vt_image_bytes(tile_keys, d);
  const size_t needed = size_t{5} * per_req * kv_heads * image_bytes;
  p.fp8_workspace_bytes = needed - 16;
  DeviceArray<uint8_t> images(bytes);
  p.fp8_workspace = images.get();
  const Status small = v3::launch_fp8_v_transpose(p, tile_keys, nullptr);
  EXPECT_EQ(small.code(), StatusCode::kInvalidArgument) << small.to_string();
  EXPECT_NE(small.to_string().find("fp8_workspace"), std::string::npos) << small.to_string();
  p.fp8_workspace_bytes = bytes;
  cudaMemset(images.get(), 0xA5, bytes);
  const Status st = v3::launch_fp8_v_transpose(p, tile_keys, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<uint8_t> out = images.to_host();
  int errors = 0;
  for (int r = 0; r < reqs; ++r) {
    for (int64_t i = 0; i < per_req; ++i) {
      for (int h = 0; h < kv_heads; ++h) {
        const uint8_t* image = out.data() + ((r * per_req + i) * kv_heads + h) * image_bytes;
        for (int n = 0; n < d; ++n) {
          for (int group = 0; group < image_keys / 16; ++group) {
            const uint8_t* chunk =
                image + (group / 8) * d * 128 + device::swizzle128_offset(n, group % 8);
            for (int q = 0; q < 16; ++q) {
              const int key = static_cast<int>(image_keys * i) + 16 * group + chunk_key(q);
              const bool written = image_keys * i < lens[r];
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
  EXPECT_EQ(errors, 0) << "D " << d << ", block " << block_size << (hnd ? ", HND" : ", NHD") << ", "
                       << tile_keys << "-key tiles";
}

TEST(HopperFp8Transpose, PrePassWritesTheVtImages) {
  PAGEDATTN_REQUIRE_HOPPER_DEVICE();
  check_vt_images(128, 128, false, 128, 21);
  check_vt_images(128, 256, true, 128, 22);
  check_vt_images(256, 64, false, 64, 24);
  check_vt_images(256, 128, true, 128, 25);
}

}  // namespace
}  // namespace pagedattn::test
