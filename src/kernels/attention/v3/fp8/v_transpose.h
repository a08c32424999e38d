// V transposed ahead of the v3 FP8 prefill kernel (v3/fp8/v_transpose_sm90.cu). Host-only header.
//
// FP8 wgmma reads both operands K-major, so P·V needs Vᵀ: head columns as rows, keys along them.
// Transposing in the kernel costs every CTA that reads a KV tile (one per query tile and query
// head) the same work again; this pre-pass does it once per launch, into images that the kernel
// copies as they are. An image holds the keys of one KV tile of one (request, KV head), or 128
// keys where tiles are smaller: D rows (head columns) of 128 bytes per 128 keys (panels), 128-byte
// swizzled, each 16-key chunk in the order of v3/fp8/operands.cuh (perm), keys past the
// request's zero: the bytes of the kernel's Vᵀ ring slot. 64-key tiles (D 256) take half an image
// each, the odd ones at a 64-byte offset in every row.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/attention/paged_attention.h"
#include "kernels/attention/v3/fp8/traits.cuh"
#include "pagedattn/status.h"

namespace pagedattn::kernels::attention::v3 {

// Image (req, kv_head, i) of the workspace: at ((req * images_per_req + i) * num_kv_heads +
// kv_head) * image bytes.
inline int64_t fp8_vt_images_per_req(const PagedAttentionParams& p, int tile_keys) {
  const int keys = fp8_vt_image_keys(tile_keys);
  return (static_cast<int64_t>(p.max_seq_len) + keys - 1) / keys;
}

// Writes the images for KV tiles of tile_keys keys of every request (p's e4m3 cache, seqused_k,
// block table) into p.fp8_workspace. InvalidArgument naming fp8_workspace when it is missing or
// smaller than paged_attention_fp8_workspace_bytes(p) (which covers every tile size).
Status launch_fp8_v_transpose(const PagedAttentionParams& p, int tile_keys, cudaStream_t stream);

}  // namespace pagedattn::kernels::attention::v3
