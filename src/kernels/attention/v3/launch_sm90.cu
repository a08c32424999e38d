// Launches the v3 prefill kernel: checks what it serves and that the device is compute capability
// 9.0, encodes the Q and paged K/V tensor maps, picks the grid, launches the head size's kernel
// (v3/instantiations/prefill_v3_hd<D>_sm90.cu). Built for sm_90a alone (the _sm90 suffix).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/mask.h"
#include "device/tma.cuh"
#include "kernels/attention/split_combine.cuh"
#include "kernels/attention/v3/fp8/launch.h"
#include "kernels/attention/v3/instance.h"
#include "kernels/attention/v3/launch.h"
#include "kernels/attention/v3/traits.cuh"
#include "kernels/paged_kv_map.h"
#include "runtime/check.h"
#include "runtime/current_device.h"

namespace pagedattn::kernels::detail {
namespace {

using attention::v3::prefill_head_size_built;
using attention::v3::PrefillArgs;
using attention::v3::PrefillTraits;

// f(PrefillTraits<d>{}) for d one of the v3 head sizes (kPrefillHeadSizes).
template <typename F>
auto with_shape(int d, F f) {
  switch (d) {
    case 64: return f(PrefillTraits<64>{});
    case 96: return f(PrefillTraits<96>{});
    case 128: return f(PrefillTraits<128>{});
    case 192: return f(PrefillTraits<192>{});
    default: return f(PrefillTraits<256>{});
  }
}

// Query rows per work tile and keys per KV tile at head size d (one of the v3 sizes).
int query_tile_rows(int d) {
  return with_shape(d, [](auto shape) { return decltype(shape)::kBlockM; });
}
int kv_tile_keys(int d) {
  return with_shape(d, [](auto shape) { return decltype(shape)::kBlockN; });
}
bool o_stage_built(int d) {
  return with_shape(d, [](auto shape) { return decltype(shape)::kStagedO; });
}
// Query positions per work tile: the tile's rows, or with GQA packing
// (PagedAttentionParams::pack_gqa) the positions whose group query heads fit in them. Heads
// validated (check_heads).
int tile_positions(const PagedAttentionParams& p, bool pack_gqa) {
  const int rows = query_tile_rows(p.head_size);
  return pack_gqa ? rows / (p.num_heads / p.num_kv_heads) : rows;
}
int num_query_tiles(const PagedAttentionParams& p, bool pack_gqa) {
  const int positions = tile_positions(p, pack_gqa);
  return (p.max_query_len + positions - 1) / positions;
}

// Pages the producer copies by TMA (one box per page and panel): multiples of the KV tile, or
// multiples of 16 that divide it (launch_paged_attention's rule; boxes of a multiple of 8 rows
// keep the swizzle's 8-row period).
bool pages_by_tma(const PagedAttentionParams& p) {
  const int keys = kv_tile_keys(p.head_size);
  return p.block_size % keys == 0 || (p.block_size % 16 == 0 && keys % p.block_size == 0);
}

std::string built_sizes() {
  std::string names;
  for (int d : attention::v3::kPrefillHeadSizes) {
    if (prefill_head_size_built(d)) names += (names.empty() ? "" : ", ") + std::to_string(d);
  }
  return names.empty() ? "none" : names;
}

bool aligned(const void* ptr, int bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % static_cast<uintptr_t>(bytes) == 0;
}

Status unsupported(const std::string& what) {
  return unimplemented("paged attention v3: " + what + " (use kernel generation v2)");
}

// What GQA packing leaves out (PagedAttentionParams::pack_gqa): the FP8 kernel, the score
// transforms (per-row heads would need per-row ALiBi slopes; the plain kernel's registers stay as
// they are) and groups larger than the query tile.
Status check_packable(const PagedAttentionParams& p) {
  if (p.cache_dtype == DType::kFP8E4M3 || mask::soft_cap_applies(p.softcap) ||
      p.alibi_slopes != nullptr) {
    return unsupported(
        "GQA packing with an fp8_e4m3 cache, a soft cap or ALiBi (packed: bf16 "
        "cache, masks, windows, sinks, split-KV)");
  }
  const int group = p.num_heads / p.num_kv_heads, rows = query_tile_rows(p.head_size);
  if (group > rows) {
    return unsupported("GQA packing of " + std::to_string(group) +
                       " query heads per KV head (allowed: at " + "most " + std::to_string(rows) +
                       ", the query tile's rows at head_size " + std::to_string(p.head_size) + ")");
  }
  return ok_status();
}

Status check_served(const PagedAttentionParams& p, bool pack_gqa) {
  if (!prefill_head_size_built(p.head_size)) {
    return unsupported("head_size " + std::to_string(p.head_size) + " (built: " + built_sizes() +
                       ")");
  }
  if (p.cache_dtype == DType::kFP8E4M3) {
    PAGEDATTN_RETURN_IF_ERROR(attention::v3::check_fp8_served(p));
  } else if (p.q_dtype != DType::kBF16 || p.cache_dtype != DType::kBF16) {
    return unsupported("q_dtype " + std::string(dtype_name(p.q_dtype)) + " with cache_dtype " +
                       std::string(dtype_name(p.cache_dtype)) +
                       " (built: bf16 with bf16 or fp8_e4m3)");
  }
  if (p.block_size <= 0 || !pages_by_tma(p)) {
    const int keys = kv_tile_keys(p.head_size);
    std::string divisors;
    for (int b = 16; b < keys; b *= 2) divisors += std::to_string(b) + ", ";
    return unsupported("block_size " + std::to_string(p.block_size) + " (allowed: " + divisors +
                       "or multiples of " + std::to_string(keys) + " at head_size " +
                       std::to_string(p.head_size) + ")");
  }
  const bool features = p.alibi_slopes != nullptr || p.sinks != nullptr ||
                        mask::soft_cap_applies(p.softcap) || p.window_left >= 0 ||
                        p.window_right >= 0;
  if (p.cache_dtype == DType::kFP8E4M3 && (features || p.max_num_splits > 1)) {
    return unsupported(
        "ALiBi, sinks, soft cap, sliding window and split-KV with an fp8_e4m3 cache (the FP8 "
        "kernel has none of them; the bf16 kernel has all)");
  }
  // One query row per request and KV head group (decode): a 128-row or larger tile per query head
  // wastes the tensor cores and reads K/V once per query head, and v2's decode tile packs the
  // group.
  if (!(p.scale > 0.0f) || std::isinf(p.scale)) {  // the softmax takes maxima of unscaled scores
    return unsupported("scale " + std::to_string(p.scale) + " (allowed: finite, > 0)");
  }
  const bool heads_ok =
      p.num_kv_heads > 0 && p.num_heads >= p.num_kv_heads && p.num_heads % p.num_kv_heads == 0;
  if (heads_ok && pack_gqa) PAGEDATTN_RETURN_IF_ERROR(check_packable(p));
  if (!pack_gqa && heads_ok && int64_t{p.max_query_len} * (p.num_heads / p.num_kv_heads) <= 16) {
    return unsupported("decode-shaped launch: max_query_len " + std::to_string(p.max_query_len) +
                       " x " + std::to_string(p.num_heads / p.num_kv_heads) +
                       " query heads per KV head <= 16 (v2's decode tile serves it; v3 only with "
                       "GQA packing)");
  }
  const int64_t tiles = heads_ok ? int64_t{pack_gqa ? p.num_kv_heads : p.num_heads} * request_slots(p) *
                                       num_query_tiles(p, pack_gqa) * std::max(1, p.max_num_splits)
                                 : 0;
  if (!heads_ok || tiles >= (int64_t{1} << 31)) {
    return invalid_argument("paged attention v3: num_heads " + std::to_string(p.num_heads) +
                            " must be a multiple of num_kv_heads " +
                            std::to_string(p.num_kv_heads) +
                            " and num_heads * num_reqs * query tiles * splits < 2^31");
  }
  // Tensor maps: 16-byte aligned bases and strides, dimensions in increasing stride order.
  const int64_t strides[] = {p.q_token_stride, p.q_head_stride, p.cache_block_stride,
                             p.cache_token_stride, p.cache_head_stride};
  bool maps_ok = aligned(p.q, 16) && aligned(p.k_cache, 16) && aligned(p.v_cache, 16) &&
                 aligned(p.out, 4) && p.out_token_stride % 2 == 0 && p.out_head_stride % 2 == 0 &&
                 p.q_head_stride < p.q_token_stride &&
                 p.cache_token_stride <= p.cache_block_stride &&  // equal with one KV head
                 p.cache_head_stride <= p.cache_block_stride;
  for (int64_t s : strides) maps_ok = maps_ok && s > 0 && s % 8 == 0;
  if (!maps_ok) {
    return unsupported(
        "q, k_cache and v_cache must be 16-byte aligned with strides that are multiples of 8 "
        "elements, heads inside tokens for q, tokens and heads inside a block");
  }
  return ok_status();
}

// The sm_90a code runs on compute capability 9.0 only.
Status check_device() {
  PAGEDATTN_ASSIGN_OR_RETURN(const CudaDeviceInfo* device, runtime::current_cuda_device());
  const int major = device->capability.major, minor = device->capability.minor;
  if (major != 9 || minor != 0) {
    return unsupported("compute capability " + std::to_string(major) + "." + std::to_string(minor) +
                       " (needs 9.0)");
  }
  return ok_status();
}

Status map_status(CUresult r, const char* which) {
  if (r == CUDA_SUCCESS) return ok_status();
  return internal_error(std::string("paged attention v3: encoding the ") + which +
                        " tensor map failed (CUresult " + std::to_string(static_cast<int>(r)) +
                        ")");
}

// Q [num_tokens, num_heads, D]: dimensions {column, head, token}, boxes of one 128-byte swizzle
// span (64 bf16 columns, 128 e4m3 ones) x 1 x the query tile's rows; with GQA packing 64 columns x
// group heads x the tile's positions (rows in (position, head) order: the packed tile's).
Status encode_q_map(const PagedAttentionParams& p, bool pack_gqa, CUtensorMap* map) {
  const bool e4m3 = p.q_dtype == DType::kFP8E4M3;
  const uint64_t bytes = e4m3 ? 1 : 2;
  const uint64_t dims[3] = {static_cast<uint64_t>(p.head_size), static_cast<uint64_t>(p.num_heads),
                            static_cast<uint64_t>(p.num_tokens)};
  const uint64_t strides[2] = {static_cast<uint64_t>(p.q_head_stride) * bytes,
                               static_cast<uint64_t>(p.q_token_stride) * bytes};
  const uint32_t box[3] = {static_cast<uint32_t>(128 / bytes),
                           static_cast<uint32_t>(pack_gqa ? p.num_heads / p.num_kv_heads : 1),
                           static_cast<uint32_t>(tile_positions(p, pack_gqa))};
  return map_status(device::encode_tensor_map_sw128(
                        map, e4m3 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_UINT16,
                        p.q, 3, dims, strides, box, CU_TENSOR_MAP_L2_PROMOTION_L2_256B),
                    "Q");
}

// Both planes by one geometry: K and V lie at two addresses with the same strides.
CUresult encode_planes(const PagedAttentionParams& p, const PagedKvMapShape& m, KvMaps* maps) {
  const CUresult k = device::encode_tensor_map_16bit_sw128(&maps->k, p.k_cache, m.rank, m.dims,
                                                           m.strides_bytes, m.box);
  if (k != CUDA_SUCCESS) return k;
  return device::encode_tensor_map_16bit_sw128(&maps->v, p.v_cache, m.rank, m.dims, m.strides_bytes,
                                               m.box);
}

// The cache's planes (kernels/paged_kv_map.h) in boxes of 64 columns x one KV tile of tokens (one
// page when pages are smaller; at D 96 a box's columns past 96 are zeros), or, where the layout
// allows, in boxes of a whole tile for pages holding whole tiles (a->panel_fold) and of a whole
// page for smaller ones (a->kv_group_major): each TMA copy costs the producer a few hundred cycles
// whatever its size.
Status encode_kv_maps(const PagedAttentionParams& p, KvMaps* maps, PrefillArgs* a) {
  const int tile_keys = kv_tile_keys(p.head_size);
  const uint32_t keys = static_cast<uint32_t>(std::min(tile_keys, p.block_size));
  PagedKvMapShape panels;
  a->panel_fold =
      p.block_size >= tile_keys ? paged_kv_panel_map_shape(p, 2, keys, &panels) : PanelFold::kNone;
  // A driver that refuses the panel map's strides (the panel's 128 bytes after the token's larger
  // stride) gets the map of one box per panel.
  if (a->panel_fold != PanelFold::kNone && encode_planes(p, panels, maps) == CUDA_SUCCESS) {
    return ok_status();
  }
  a->panel_fold = PanelFold::kNone;
  // Pages smaller than the tile: one box per page of every panel where the layout has a group map
  // (the tile group-major), else (or where a driver refuses it) one per page and panel.
  PagedKvGroupMapShape groups;
  if (p.block_size < tile_keys && paged_kv_group_map_shape(p, 2, keys / 8, &groups) &&
      encode_planes(p, groups.map, maps) == CUDA_SUCCESS) {
    a->kv_group_major = true;
    a->kv_groups_per_block = static_cast<int>(groups.groups_per_block);
    return ok_status();
  }
  const PagedKvMapShape m = paged_kv_map_shape(p, 2, 64, keys);
  a->kv_token_coord = m.token_coord;
  return map_status(encode_planes(p, m, maps), "K/V");
}

}  // namespace

Status paged_attention_v3_serves(const PagedAttentionParams& p) {
  PAGEDATTN_RETURN_IF_ERROR(check_served(p, p.pack_gqa));
  return check_device();
}

namespace {

// Producer warps that issue a KV tile's TMA boxes, at most one per box: one issuing thread is
// held a few hundred cycles by each copy, so a tile of many boxes needs several.
constexpr int kMaxBoxWarps = 4;

// The launch; max_ctas > 0 caps the persistent grid (launch_paged_attention_v3_few_ctas).
Status launch_v3(const PagedAttentionParams& p, int kernel_head_size, void* stream, int max_ctas) {
  PAGEDATTN_RETURN_IF_ERROR(check_served(p, p.pack_gqa));
  PAGEDATTN_RETURN_IF_ERROR(check_device());
  if (kernel_head_size != p.head_size) {
    return unsupported("kernel head size " + std::to_string(kernel_head_size) + " for head_size " +
                       std::to_string(p.head_size) + " (v3 serves its sizes exactly)");
  }
  if (request_slots(p) == 0 || p.num_tokens == 0 || p.max_query_len == 0) return ok_status();

  alignas(64) CUtensorMap q_map;
  alignas(64) KvMaps kv_maps;
  PrefillArgs a{};
  const bool pack = p.pack_gqa;
  PAGEDATTN_RETURN_IF_ERROR(encode_q_map(p, pack, &q_map));
  const bool fp8 = p.cache_dtype == DType::kFP8E4M3;  // its own K/V map (launch_prefill_fp8)
  if (fp8) {
    std::memset(&kv_maps, 0, sizeof(kv_maps));  // not read
  } else {
    PAGEDATTN_RETURN_IF_ERROR(encode_kv_maps(p, &kv_maps, &a));
  }
  // A KV tile's boxes (one per tile or page with the panel or group map, else one per page and
  // 64-column panel) are dealt to up to kMaxBoxWarps producer warps.
  const int pages_per_tile = std::max(1, kv_tile_keys(p.head_size) / p.block_size);
  const bool whole_head_boxes = a.panel_fold != PanelFold::kNone || a.kv_group_major;
  const int panel_boxes = whole_head_boxes ? 1 : (p.head_size + 63) / 64;
  const int boxes_per_tile = pages_per_tile * panel_boxes;
  a.box_warps = std::min(kMaxBoxWarps, boxes_per_tile);
  a.cu_seqlens_q = p.cu_seqlens_q;
  a.seqused_k = p.seqused_k;
  a.block_table = p.block_table;
  a.block_table_stride = p.block_table_stride;
  a.v_cache = static_cast<const uint16_t*>(p.v_cache);
  a.cache_block_stride = p.cache_block_stride;
  a.cache_token_stride = p.cache_token_stride;
  a.cache_head_stride = p.cache_head_stride;
  a.block_size = p.block_size;
  a.group = p.num_heads / p.num_kv_heads;
  a.num_kv_heads = p.num_kv_heads;
  a.packed_positions = pack ? tile_positions(p, true) : 0;
  a.num_heads = p.num_heads;
  a.num_reqs = request_slots(p);
  a.pass_requests = p.pass_requests;
  a.num_q_tiles = num_query_tiles(p, pack);
  // Split-KV: partials (f32) for the combine, which adds the sinks once.
  const bool split = p.max_num_splits > 1;
  a.max_splits = split ? p.max_num_splits : 1;
  a.splits_per_req = p.num_splits_per_req;
  a.split_out = p.split_out;
  a.split_lse = p.split_lse;
  a.num_tokens = static_cast<int>(p.num_tokens);
  // Staged O writes 16-byte row segments: where PrefillSmem has the stage and the rows allow.
  // Packed tiles store from the accumulators (a staged row is one head's).
  const bool staged_o = !split && !pack && o_stage_built(p.head_size) && aligned(p.out, 16) &&
                        p.out_token_stride % 8 == 0 && p.out_head_stride % 8 == 0;
  a.staged_o = staged_o;
  // Score units (ScoreRule): raw scores, or tanh(x * scale / cap) with a soft cap; the softmax
  // scales them (its maxima of unscaled scores are the scaled ones' for a positive factor).
  a.score.capped = mask::soft_cap_applies(p.softcap);
  const float unit = a.score.capped ? p.softcap : p.scale;  // natural-log units per score unit
  if (a.score.capped) a.score.cap_pre = mask::make_soft_cap(p.scale, p.softcap, 1.0f).pre;
  a.score.alibi_slopes = p.alibi_slopes;
  a.score.slope_factor = 1.0f / unit;
  a.score.transform = a.score.capped || p.alibi_slopes != nullptr;
  a.scale = unit;
  a.scale_log2 = unit * 1.4426950408889634f;
  a.sinks = split ? nullptr : p.sinks;
  a.mask = mask::MaskRule{p.causal, p.window_left, p.window_right};
  a.out = static_cast<uint16_t*>(p.out);
  a.out_token_stride = p.out_token_stride;
  a.out_head_stride = p.out_head_stride;
  a.lse = p.lse;
  a.lse_head_stride = p.lse_head_stride;

  const int tiles =
      (pack ? a.num_kv_heads : a.num_heads) * a.num_reqs * a.num_q_tiles * a.max_splits;  // < 2^31
  PAGEDATTN_ASSIGN_OR_RETURN(const CudaDeviceInfo* device, runtime::current_cuda_device());
  int ctas = std::min(tiles, device->num_sms);  // one CTA fills an SM (shared memory, registers)
  if (max_ctas > 0) ctas = std::min(ctas, max_ctas);
  const auto s = static_cast<cudaStream_t>(stream);
  if (fp8) return attention::v3::launch_prefill_fp8(p, q_map, a, ctas, s);
  return with_shape(p.head_size, [&](auto shape) -> Status {
    constexpr int kD = decltype(shape)::kHeadDim;
    // A size the build leaves out (PAGEDATTN_HEAD_SIZES) has no instantiation file to link.
    if constexpr (prefill_head_size_built(kD)) {
      PAGEDATTN_RETURN_IF_ERROR(
          attention::v3::launch_prefill_kernel<kD>(q_map, kv_maps, a, ctas, s));
      if (!split) return ok_status();
      PAGEDATTN_CUDA_RETURN_IF_ERROR(attention::launch_split_combine<__nv_bfloat16>(p, s),
                                     "v3 split-KV combine");
      return ok_status();
    } else {
      return unsupported("head_size " + std::to_string(kD) + " (built: " + built_sizes() + ")");
    }
  });
}

}  // namespace

Status launch_paged_attention_v3(const PagedAttentionParams& p, int kernel_head_size,
                                 void* stream) {
  return launch_v3(p, kernel_head_size, stream, 0);
}

Status launch_paged_attention_v3_few_ctas(const PagedAttentionParams& p, int kernel_head_size,
                                          void* stream, int max_ctas) {
  return launch_v3(p, kernel_head_size, stream, max_ctas);
}

}  // namespace pagedattn::kernels::detail
