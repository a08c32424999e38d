// The pre-pass of v3/fp8/v_transpose.h: one CTA per (image, request, KV head).
#include "kernels/attention/v3/fp8/v_transpose.h"

#include <cstdint>
#include <string>

#include "runtime/check.h"

namespace pagedattn::kernels::attention::v3 {
namespace {

struct VtArgs {
  const uint8_t* v_cache;                           // e4m3, logical [block, token, head, column]
  int64_t block_stride, token_stride, head_stride;  // bytes
  const int32_t* seqused_k;
  const int32_t* block_table;
  int64_t block_table_stride;
  int block_size;
  int head_size;
  int num_kv_heads;
  int image_keys;  // keys per image (fp8_vt_image_keys)
  int64_t image_bytes;
  int64_t images_per_req;
  uint8_t* images;
};

// Output word t of a 16-key chunk for head column j of a 4-column word: keys 2t, 2t + 1, 2t + 8,
// 2t + 9 (the chunk order perm), byte j of each key's word.
__device__ __forceinline__ uint32_t chunk_word(const uint32_t (&keys)[16], int t, int j) {
  const uint32_t pick = static_cast<uint32_t>(j) | (static_cast<uint32_t>(j + 4) << 4);
  const uint32_t low = __byte_perm(keys[2 * t], keys[2 * t + 1], pick);
  const uint32_t high = __byte_perm(keys[2 * t + 8], keys[2 * t + 9], pick);
  return __byte_perm(low, high, 0x5410);
}

// Item (quad, group): keys 16 group .. + 15 of the image and head columns 4 quad .. + 3: sixteen
// 4-byte loads (a warp's lanes take neighbouring quads: one key row per load), four 16-byte
// stores (one Vᵀ chunk per column, in panel group / 8). A group lies in one page (pages are
// multiples of 16 keys).
__global__ void __launch_bounds__(256) transpose_v_images(const VtArgs a) {
  const int image = blockIdx.x, req = blockIdx.y, kv_head = blockIdx.z;
  const int keys = a.seqused_k[req];
  const int key0 = image * a.image_keys;
  if (key0 >= keys) return;  // the kernel reads no image past the request's keys
  uint8_t* out =
      a.images + ((req * a.images_per_req + image) * a.num_kv_heads + kv_head) * a.image_bytes;
  const int quads = a.head_size / 4;
  for (int item = threadIdx.x; item < quads * (a.image_keys / 16); item += blockDim.x) {
    const int quad = item % quads, group = item / quads;
    const int first = key0 + 16 * group;
    uint32_t words[16];
    if (first < keys) {
      const int32_t block = a.block_table[req * a.block_table_stride + first / a.block_size];
      const uint8_t* src = a.v_cache + block * a.block_stride +
                           (first % a.block_size) * a.token_stride + kv_head * a.head_stride +
                           4 * quad;
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        words[k] = first + k < keys
                       ? __ldg(reinterpret_cast<const uint32_t*>(src + k * a.token_stride))
                       : 0u;  // unused page slots may hold NaN
      }
    } else {
#pragma unroll
      for (int k = 0; k < 16; ++k) words[k] = 0u;
    }
    uint8_t* panel = out + (group / 8) * static_cast<int64_t>(a.head_size) * 128;
    const int chunk = group % 8;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int column = 4 * quad + j;
      *reinterpret_cast<uint4*>(panel + column * 128 + ((chunk ^ (column % 8)) << 4)) =
          make_uint4(chunk_word(words, 0, j), chunk_word(words, 1, j), chunk_word(words, 2, j),
                     chunk_word(words, 3, j));
    }
  }
}

}  // namespace

Status launch_fp8_v_transpose(const PagedAttentionParams& p, int tile_keys, cudaStream_t stream) {
  const int64_t images = fp8_vt_images_per_req(p, tile_keys);
  const int64_t image_bytes = fp8_vt_image_bytes(tile_keys, p.head_size);
  const size_t needed = static_cast<size_t>(p.num_reqs) * images * p.num_kv_heads * image_bytes;
  if (p.fp8_workspace == nullptr || p.fp8_workspace_bytes < needed ||
      reinterpret_cast<uintptr_t>(p.fp8_workspace) % 16 != 0) {
    return invalid_argument(
        "paged attention v3 FP8: fp8_workspace must hold " + std::to_string(needed) +
        " bytes, 16-byte aligned (paged_attention_fp8_workspace_bytes gives enough: " +
        std::to_string(paged_attention_fp8_workspace_bytes(p)) + "); given " +
        std::to_string(p.fp8_workspace_bytes) + (p.fp8_workspace == nullptr ? ", null" : ""));
  }
  if (images == 0 || p.num_reqs == 0) return ok_status();
  if (p.num_reqs > 65535) {  // the grid's y dimension
    return unimplemented("paged attention v3 FP8: num_reqs " + std::to_string(p.num_reqs) +
                         " (allowed: up to 65535; use kernel generation v2)");
  }
  VtArgs a{};
  a.v_cache = static_cast<const uint8_t*>(p.v_cache);
  a.block_stride = p.cache_block_stride;  // e4m3: elements are bytes
  a.token_stride = p.cache_token_stride;
  a.head_stride = p.cache_head_stride;
  a.seqused_k = p.seqused_k;
  a.block_table = p.block_table;
  a.block_table_stride = p.block_table_stride;
  a.block_size = p.block_size;
  a.head_size = p.head_size;
  a.num_kv_heads = p.num_kv_heads;
  a.image_keys = fp8_vt_image_keys(tile_keys);
  a.image_bytes = image_bytes;
  a.images_per_req = images;
  a.images = static_cast<uint8_t*>(p.fp8_workspace);
  const dim3 grid(static_cast<unsigned>(images), static_cast<unsigned>(p.num_reqs),
                  static_cast<unsigned>(p.num_kv_heads));
  transpose_v_images<<<grid, 256, 0, stream>>>(a);
  return runtime::check_launch("transpose_v_images");
}

}  // namespace pagedattn::kernels::attention::v3
