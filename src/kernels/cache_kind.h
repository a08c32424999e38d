// The element kind of a KV cache, as the kernels see it: one enum for the cache write and the
// attention kernels, so an instantiation's template argument names the cache dtype itself.
#pragma once

#include "pagedattn/types.h"

namespace pagedattn::kernels {

enum class CacheKind { kF32, kF16, kBF16, kFp8E4M3, kFp8E5M2, kUnsupported };

constexpr CacheKind cache_kind(DType dtype) {
  switch (dtype) {
    case DType::kF32: return CacheKind::kF32;
    case DType::kF16: return CacheKind::kF16;
    case DType::kBF16: return CacheKind::kBF16;
    case DType::kFP8E4M3: return CacheKind::kFp8E4M3;
    case DType::kFP8E5M2: return CacheKind::kFp8E5M2;
    default: return CacheKind::kUnsupported;
  }
}

constexpr bool is_fp8(CacheKind kind) {
  return kind == CacheKind::kFp8E4M3 || kind == CacheKind::kFp8E5M2;
}

}  // namespace pagedattn::kernels
