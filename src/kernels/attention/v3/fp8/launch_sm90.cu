// The v3 FP8 prefill launch: what it serves, the e4m3 K/V tensor map, the FP8 arguments, the head
// size's kernel (prefill_fp8_d<D>_sm90.cu). Built for sm_90a alone.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "device/tma.cuh"
#include "kernels/attention/v3/fp8/instance.h"
#include "kernels/attention/v3/fp8/launch.h"
#include "kernels/attention/v3/fp8/v_transpose.h"
#include "kernels/paged_kv_map.h"

namespace pagedattn::kernels::attention::v3 {
namespace {

Status unsupported(const std::string& what) {
  return unimplemented("paged attention v3 FP8: " + what + " (use kernel generation v2)");
}

// The K plane of bytes (kernels/paged_kv_map.h) in boxes of 128 columns (one swizzle span) x
// `keys` tokens (a KV tile); V reaches the kernel transposed (v_transpose.h).
Status encode_fp8_k_map(const PagedAttentionParams& p, int keys, CUtensorMap* map,
                        int* token_coord) {
  const PagedKvMapShape m = paged_kv_map_shape(p, 1, 128, static_cast<uint32_t>(keys));
  *token_coord = m.token_coord;
  const CUresult r =
      device::encode_tensor_map_sw128(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, p.k_cache, m.rank, m.dims,
                                      m.strides_bytes, m.box, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  if (r == CUDA_SUCCESS) return ok_status();
  return internal_error("paged attention v3 FP8: encoding the K tensor map failed (CUresult " +
                        std::to_string(static_cast<int>(r)) + ")");
}

// The tiles a launch runs: at D 256 wide where the pages hold them, else narrow; at D 128 the
// one configuration (kNarrow's keys).
Fp8Tiles launch_tiles(const PagedAttentionParams& p) {
  const bool wide = p.head_size == 256 && p.block_size % fp8_kv_tile_keys(256, Fp8Tiles::kWide) == 0;
  return wide ? Fp8Tiles::kWide : Fp8Tiles::kNarrow;
}

}  // namespace

Status check_fp8_served(const PagedAttentionParams& p) {
  const bool e4m3_query = p.q_dtype == DType::kFP8E4M3;
  if (p.cache_dtype != DType::kFP8E4M3 || (p.q_dtype != DType::kBF16 && !e4m3_query)) {
    return unsupported("q_dtype " + std::string(dtype_name(p.q_dtype)) + " with cache_dtype " +
                       std::string(dtype_name(p.cache_dtype)) +
                       " (built: bf16 or fp8_e4m3 with fp8_e4m3)");
  }
  // e4m3 Q by TMA: 16-byte strides (bf16's multiples of 8 elements are).
  if (e4m3_query && (p.q_token_stride % 16 != 0 || p.q_head_stride % 16 != 0)) {
    return unsupported("fp8_e4m3 q strides (token " + std::to_string(p.q_token_stride) +
                       ", head " + std::to_string(p.q_head_stride) +
                       ") must be multiples of 16 elements");
  }
  if (!p.fp8_tensor_cores) {
    return unsupported("fp8_e4m3 cache without fp8_tensor_cores (opt-in: Q and P rounded to e4m3)");
  }
  if (p.head_size != 128 && p.head_size != 256) {
    return unsupported("head_size " + std::to_string(p.head_size) + " (allowed: 128, 256)");
  }
  const int keys = fp8_kv_tile_keys(p.head_size, launch_tiles(p));
  if (p.block_size <= 0 || p.block_size % keys != 0) {
    return unsupported("block_size " + std::to_string(p.block_size) + " (allowed: multiples of " +
                       std::to_string(keys) + " at head_size " + std::to_string(p.head_size) + ")");
  }
  if (!(p.scale > 0.0f) || std::isinf(p.scale)) {  // the softmax's maxima are of raw scores
    return unsupported("scale " + std::to_string(p.scale) + " (allowed: finite, > 0)");
  }
  if (p.num_reqs > 65535) {  // the V pre-pass's grid has a y dimension per request
    return unsupported("num_reqs " + std::to_string(p.num_reqs) + " (allowed: up to 65535)");
  }
  if (p.k_scale == nullptr || p.v_scale == nullptr) {
    return invalid_argument("paged attention v3 FP8: k_scale and v_scale must be given");
  }
  // TMA: 16-byte strides (the bf16 kernel's checks cover Q's and the alignments).
  const int64_t strides[] = {p.cache_block_stride, p.cache_token_stride, p.cache_head_stride};
  bool ok = true;
  for (int64_t s : strides) ok = ok && s % 16 == 0;
  if (!ok) return unsupported("cache strides must be multiples of 16 elements");
  return ok_status();
}

Status launch_prefill_fp8(const PagedAttentionParams& p, const CUtensorMap& q_map,
                          const PrefillArgs& base, int grid, cudaStream_t stream) {
  alignas(64) CUtensorMap k_map;
  PrefillFp8Args a{};
  a.base = base;
  const Fp8Tiles tiles = launch_tiles(p);
  const int tile_keys = fp8_kv_tile_keys(p.head_size, tiles);
  PAGEDATTN_RETURN_IF_ERROR(
      encode_fp8_k_map(p, tile_keys, &k_map, &a.base.kv_token_coord));
  a.k_scale = p.k_scale;
  a.v_scale = p.v_scale;
  a.per_head_scales = p.per_head_scales;
  a.q_e4m3 = p.q_dtype == DType::kFP8E4M3;
  a.q_descale = p.q_descale;
  a.q_descale_req_stride = p.q_descale_req_stride;
  a.q_descale_head_stride = p.q_descale_head_stride;
  PAGEDATTN_RETURN_IF_ERROR(launch_fp8_v_transpose(p, tile_keys, stream));  // Vᵀ for every CTA
  a.vt_images = static_cast<const uint8_t*>(p.fp8_workspace);
  a.vt_images_per_req = fp8_vt_images_per_req(p, tile_keys);
  return p.head_size == 128 ? launch_prefill_fp8_kernel<128>(q_map, k_map, a, tiles, grid, stream)
                            : launch_prefill_fp8_kernel<256>(q_map, k_map, a, tiles, grid, stream);
}

}  // namespace pagedattn::kernels::attention::v3
