// KV-cache write (vLLM's reshape_and_cache_flash): new K/V rows go to the paged cache at
// slot_mapping, encoded to the cache dtype. One CTA per token; each thread moves packs of 8
// elements of one head (16-byte loads of 16-bit inputs when aligned). FP8 encoding is
// device::float_to_fp8 (bit-exact with common/numeric.h) of x / scale in IEEE float division.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "device/fp8.cuh"
#include "kernels/cache_kind.h"
#include "kernels/cache_write.h"
#include "runtime/check.h"

namespace pagedattn::kernels {
namespace {

constexpr int kPack = 8;
constexpr int kThreads = 128;

template <typename T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ float to_float<__half>(__half x) {
  return __half2float(x);
}
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <CacheKind kKind>
struct CacheStorage;
template <>
struct CacheStorage<CacheKind::kF32> {
  using Type = float;
};
template <>
struct CacheStorage<CacheKind::kF16> {
  using Type = __half;
};
template <>
struct CacheStorage<CacheKind::kBF16> {
  using Type = __nv_bfloat16;
};
template <>
struct CacheStorage<CacheKind::kFp8E4M3> {
  using Type = uint8_t;
};
template <>
struct CacheStorage<CacheKind::kFp8E5M2> {
  using Type = uint8_t;
};

template <CacheKind kKind>
__device__ __forceinline__ typename CacheStorage<kKind>::Type encode(float x, float scale) {
  if constexpr (kKind == CacheKind::kF32) {
    return x;
  } else if constexpr (kKind == CacheKind::kF16) {
    return __float2half_rn(x);
  } else if constexpr (kKind == CacheKind::kBF16) {
    return __float2bfloat16_rn(x);
  } else {
    // The GPU's division returns the canonical (positive) NaN; the host keeps the input's sign.
    const float y = isnan(x) ? x : x / scale;
    constexpr auto kFormat =
        kKind == CacheKind::kFp8E4M3 ? device::Fp8Format::kE4M3 : device::Fp8Format::kE5M2;
    return device::float_to_fp8<kFormat>(y);
  }
}

struct CacheWriteArgs {
  const void* key;    // [T, Hkv, D]
  const void* value;  // [T, Hkv, D]
  int64_t key_token_stride, key_head_stride;
  int64_t value_token_stride, value_head_stride;
  void* k_cache;  // planes, logical [num_blocks, block_size, Hkv, D], one set of strides
  void* v_cache;
  int64_t block_stride, token_stride, head_stride;
  const int64_t* slot_mapping;  // [T]
  const float* k_scale;         // [1] or [Hkv], or nullptr (1.0)
  const float* v_scale;
  int scale_head_stride;  // 1 per head, 0 per tensor
  int num_kv_heads, head_size, block_size;
};

// kVec: every row start and stride is a multiple of kPack elements and 16-byte aligned, so packs
// can move as whole vectors; kRaw: source and cache have one dtype (plain copy, bits preserved).
template <typename Src, CacheKind kKind, bool kVec>
__global__ void __launch_bounds__(kThreads) cache_write_kernel(CacheWriteArgs a) {
  using Dst = typename CacheStorage<kKind>::Type;
  constexpr bool kRaw = std::is_same_v<Src, Dst>;
  const int64_t token = blockIdx.x;
  const int64_t slot = a.slot_mapping[token];
  if (slot < 0) return;  // padding: nothing to write
  const int64_t block = slot / a.block_size;
  const int64_t offset = slot % a.block_size;
  const int packs_per_head = a.head_size / kPack;
  const int packs = 2 * a.num_kv_heads * packs_per_head;
  for (int i = threadIdx.x; i < packs; i += blockDim.x) {
    const int kv = i / (a.num_kv_heads * packs_per_head);
    const int rest = i - kv * a.num_kv_heads * packs_per_head;
    const int head = rest / packs_per_head;
    const int d0 = (rest - head * packs_per_head) * kPack;
    const Src* src = static_cast<const Src*>(kv == 0 ? a.key : a.value) +
                     token * (kv == 0 ? a.key_token_stride : a.value_token_stride) +
                     head * (kv == 0 ? a.key_head_stride : a.value_head_stride) + d0;
    Dst* dst = static_cast<Dst*>(kv == 0 ? a.k_cache : a.v_cache) + block * a.block_stride +
               offset * a.token_stride + head * a.head_stride + d0;
    alignas(16) Src in[kPack];
    if constexpr (kVec) {
      static_assert(sizeof(in) % 16 == 0, "a pack is whole 16-byte vectors");
#pragma unroll
      for (int v = 0; v < static_cast<int>(sizeof(in) / 16); ++v) {
        reinterpret_cast<uint4*>(in)[v] = reinterpret_cast<const uint4*>(src)[v];
      }
    } else {
#pragma unroll
      for (int e = 0; e < kPack; ++e) in[e] = src[e];
    }
    alignas(16) Dst out[kPack];
    if constexpr (kRaw) {
#pragma unroll
      for (int e = 0; e < kPack; ++e) out[e] = in[e];
    } else {
      const float* scale_ptr = kv == 0 ? a.k_scale : a.v_scale;
      const float scale = scale_ptr != nullptr ? scale_ptr[head * a.scale_head_stride] : 1.0f;
#pragma unroll
      for (int e = 0; e < kPack; ++e) out[e] = encode<kKind>(to_float(in[e]), scale);
    }
    if constexpr (kVec && sizeof(out) % 16 == 0) {
#pragma unroll
      for (int v = 0; v < static_cast<int>(sizeof(out) / 16); ++v) {
        reinterpret_cast<uint4*>(dst)[v] = reinterpret_cast<const uint4*>(out)[v];
      }
    } else if constexpr (kVec && sizeof(out) == 8) {
      *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(out);
    } else {
#pragma unroll
      for (int e = 0; e < kPack; ++e) dst[e] = out[e];
    }
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <typename Src, CacheKind kKind>
Status launch_typed(const CacheWriteArgs& args, int64_t num_tokens, size_t src_size,
                    size_t dst_size, cudaStream_t stream) {
  // Vector moves need 16-byte aligned rows: base pointers and every stride (in bytes) aligned.
  bool vec = aligned16(args.key) && aligned16(args.value) && aligned16(args.k_cache) &&
             aligned16(args.v_cache);
  for (int64_t s : {args.key_token_stride, args.key_head_stride, args.value_token_stride,
                    args.value_head_stride}) {
    vec = vec && (s * static_cast<int64_t>(src_size)) % 16 == 0;
  }
  // A cache pack is 8 (FP8), 16 or 32 bytes; it moves as one 8- or 16-byte vector or as two.
  const int64_t dst_align = dst_size * kPack < 16 ? static_cast<int64_t>(dst_size * kPack) : 16;
  for (int64_t s : {args.block_stride, args.token_stride, args.head_stride}) {
    vec = vec && (s * static_cast<int64_t>(dst_size)) % dst_align == 0;
  }
  const dim3 grid(static_cast<unsigned>(num_tokens));
  if (vec) {
    cache_write_kernel<Src, kKind, true><<<grid, kThreads, 0, stream>>>(args);
  } else {
    cache_write_kernel<Src, kKind, false><<<grid, kThreads, 0, stream>>>(args);
  }
  return runtime::check_launch("cache_write_kernel");
}

template <typename Src>
Status dispatch_cache(DType cache_dtype, const CacheWriteArgs& args, int64_t num_tokens,
                      cudaStream_t stream) {
  switch (cache_dtype) {
    case DType::kF32:
      return launch_typed<Src, CacheKind::kF32>(args, num_tokens, sizeof(Src), 4, stream);
    case DType::kF16:
      return launch_typed<Src, CacheKind::kF16>(args, num_tokens, sizeof(Src), 2, stream);
    case DType::kBF16:
      return launch_typed<Src, CacheKind::kBF16>(args, num_tokens, sizeof(Src), 2, stream);
    case DType::kFP8E4M3:
      return launch_typed<Src, CacheKind::kFp8E4M3>(args, num_tokens, sizeof(Src), 1, stream);
    case DType::kFP8E5M2:
      return launch_typed<Src, CacheKind::kFp8E5M2>(args, num_tokens, sizeof(Src), 1, stream);
    default:
      return invalid_argument("kv_cache dtype " + std::string(dtype_name(cache_dtype)) +
                              " cannot be written; expected f32, f16, bf16, fp8_e4m3 or fp8_e5m2");
  }
}

Status check_scale(const TensorView& scale, std::string_view what, int num_kv_heads,
                   const Device& device) {
  if (!scale.defined()) return ok_status();
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(scale, what, {DType::kF32}));
  PAGEDATTN_RETURN_IF_ERROR(expect_device(scale, what, device));
  if (scale.numel() != 1 && scale.numel() != num_kv_heads) {
    return invalid_argument(std::string(what) + " has " + std::to_string(scale.numel()) +
                            " elements; expected 1 (per tensor) or num_kv_heads = " +
                            std::to_string(num_kv_heads) + " (per head)");
  }
  if (scale.numel() > 1 && scale.rank() == 1 && scale.stride(0) != 1) {
    return invalid_argument(std::string(what) + " must be contiguous; got " + scale.describe());
  }
  return ok_status();
}

}  // namespace

Status launch_cache_write(const TensorView& key, const TensorView& value,
                          const KVCacheView& kv_cache, const TensorView& slot_mapping,
                          const TensorView& k_scale, const TensorView& v_scale, void* stream) {
  if (!kv_cache.defined()) return invalid_argument("kv_cache is required");
  PAGEDATTN_RETURN_IF_ERROR(kv_cache.check());
  const Device device = kv_cache.device();
  if (!device.is_cuda()) {
    return invalid_argument(kv_cache.describe() + " is on " + device_name(device) +
                            "; the CUDA cache write needs cuda");
  }
  const int64_t block_size = kv_cache.block_size(), num_kv_heads = kv_cache.num_kv_heads(),
                head_size = kv_cache.head_size();
  if (head_size % kPack != 0) {
    return invalid_argument("the CUDA cache write needs head_size % 8 == 0; got " +
                            kv_cache.describe());
  }
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(slot_mapping, "slot_mapping", 1));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(slot_mapping, "slot_mapping", {DType::kI64}));
  PAGEDATTN_RETURN_IF_ERROR(expect_device(slot_mapping, "slot_mapping", device));
  if (slot_mapping.stride(0) != 1 && slot_mapping.size(0) > 1) {
    return invalid_argument("slot_mapping must be contiguous; got " + slot_mapping.describe());
  }
  const int64_t num_tokens = slot_mapping.size(0);  // key/value may carry CUDA-graph padding rows
  for (const auto& [t, what] : {std::pair{&key, "key"}, std::pair{&value, "value"}}) {
    PAGEDATTN_RETURN_IF_ERROR(expect_rank(*t, what, 3));
    PAGEDATTN_RETURN_IF_ERROR(expect_dtype(*t, what, {DType::kF32, DType::kF16, DType::kBF16}));
    PAGEDATTN_RETURN_IF_ERROR(expect_device(*t, what, device));
    if (t->size(0) < num_tokens || t->size(1) != num_kv_heads || t->size(2) != head_size ||
        t->stride(2) != 1) {
      return invalid_argument(std::string(what) + " is " + t->describe() + "; expected [>= " +
                              std::to_string(num_tokens) + ", " + std::to_string(num_kv_heads) +
                              ", " + std::to_string(head_size) + "] with a contiguous head dim");
    }
  }
  if (value.dtype() != key.dtype()) return invalid_argument("value dtype differs from key dtype");
  PAGEDATTN_RETURN_IF_ERROR(check_scale(k_scale, "k_scale", num_kv_heads, device));
  PAGEDATTN_RETURN_IF_ERROR(check_scale(v_scale, "v_scale", num_kv_heads, device));
  if (k_scale.defined() && v_scale.defined() && k_scale.numel() != v_scale.numel()) {
    return invalid_argument("k_scale and v_scale must have the same number of elements");
  }
  if (num_tokens == 0) return ok_status();

  CacheWriteArgs args{};
  args.key = key.data();
  args.value = value.data();
  args.key_token_stride = key.stride(0);
  args.key_head_stride = key.stride(1);
  args.value_token_stride = value.stride(0);
  args.value_head_stride = value.stride(1);
  args.k_cache = kv_cache.key().data();
  args.v_cache = kv_cache.value().data();
  args.block_stride = kv_cache.key().stride(0);
  args.token_stride = kv_cache.key().stride(1);
  args.head_stride = kv_cache.key().stride(2);
  args.slot_mapping = slot_mapping.data_as<const int64_t>();
  args.k_scale = k_scale.defined() ? k_scale.data_as<const float>() : nullptr;
  args.v_scale = v_scale.defined() ? v_scale.data_as<const float>() : nullptr;
  const int64_t scale_numel = k_scale.defined()   ? k_scale.numel()
                              : v_scale.defined() ? v_scale.numel()
                                                  : 1;
  args.scale_head_stride = scale_numel > 1 ? 1 : 0;
  args.num_kv_heads = static_cast<int>(num_kv_heads);
  args.head_size = static_cast<int>(head_size);
  args.block_size = static_cast<int>(block_size);

  runtime::ScopedDevice guard(device.index);
  PAGEDATTN_RETURN_IF_ERROR(guard.status());
  const auto s = static_cast<cudaStream_t>(stream);
  switch (key.dtype()) {
    case DType::kF32: return dispatch_cache<float>(kv_cache.dtype(), args, num_tokens, s);
    case DType::kF16: return dispatch_cache<__half>(kv_cache.dtype(), args, num_tokens, s);
    default: return dispatch_cache<__nv_bfloat16>(kv_cache.dtype(), args, num_tokens, s);
  }
}

}  // namespace pagedattn::kernels
