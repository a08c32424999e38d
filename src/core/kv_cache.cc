// KV-cache geometry (logical shape, layouts, strides, bytes) and the owning allocation.
#include "pagedattn/kv_cache.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include "common/checked_math.h"
#include "pagedattn/config.h"
#include "runtime/device_memory.h"
#include "runtime/host_memory.h"

namespace pagedattn {
namespace {

std::atomic<KVCacheLayout>& layout_setting() {
  static std::atomic<KVCacheLayout> layout{KVCacheLayout::kNHD};
  return layout;
}

}  // namespace

StatusOr<KVCacheShape> get_kv_cache_shape(int64_t num_blocks, int block_size, int num_kv_heads,
                                          int head_size, KVCacheDType cache_dtype) {
  const auto positive = [](std::string_view what, int64_t value) -> Status {
    if (value > 0) return ok_status();
    return invalid_argument(std::string(what) + " must be positive, got " + std::to_string(value));
  };
  PAGEDATTN_RETURN_IF_ERROR(positive("num_blocks", num_blocks));
  PAGEDATTN_RETURN_IF_ERROR(positive("block_size", block_size));
  PAGEDATTN_RETURN_IF_ERROR(positive("num_kv_heads", num_kv_heads));
  PAGEDATTN_RETURN_IF_ERROR(positive("head_size", head_size));
  // Every supported cache dtype stores one element per value, so the shape does not depend on it.
  (void)cache_dtype;
  // The element count (and so every view offset into the cache) must fit int64; the byte count is
  // checked where the storage dtype is known (allocate, kv_cache_bytes_per_block).
  if (!checked_product({num_blocks, 2, block_size, num_kv_heads, head_size})) {
    return out_of_range("KV cache of num_blocks = " + std::to_string(num_blocks) + " x 2 x " +
                        std::to_string(block_size) + " x " + std::to_string(num_kv_heads) + " x " +
                        std::to_string(head_size) + " elements overflows int64");
  }
  return KVCacheShape{num_blocks, 2, block_size, num_kv_heads, head_size};
}

KVCacheView::KVCacheView(const TensorView& kv_cache) : whole_(kv_cache) {
  if (kv_cache.rank() != 5 || kv_cache.size(1) != 2) return;
  const int64_t shape[4] = {kv_cache.size(0), kv_cache.size(2), kv_cache.size(3), kv_cache.size(4)};
  const int64_t strides[4] = {kv_cache.stride(0), kv_cache.stride(2), kv_cache.stride(3),
                              kv_cache.stride(4)};
  // Plane 1 starts one dim-1 stride after plane 0 (the view's own bytes: no overflow to check).
  std::byte* v = kv_cache.data() == nullptr
                     ? nullptr
                     : static_cast<std::byte*>(kv_cache.data()) +
                           kv_cache.stride(1) * static_cast<int64_t>(dtype_size(kv_cache.dtype()));
  key_ = TensorView(kv_cache.data(), kv_cache.dtype(), kv_cache.device(), shape, strides);
  value_ = TensorView(v, kv_cache.dtype(), kv_cache.device(), shape, strides);
}

KVCacheView::KVCacheView(const TensorView& key_cache, const TensorView& value_cache)
    : key_(key_cache), value_(value_cache) {}

Status KVCacheView::check() const {
  if (whole_.defined() && !key_.defined()) {
    return invalid_argument("kv_cache is " + whole_.describe() +
                            "; expected [num_blocks, 2, block_size, num_kv_heads, head_size]");
  }
  if (whole_.defined()) {
    if (whole_.stride(4) == 1) return ok_status();
    return invalid_argument("kv_cache must have unit stride along head_size, got " +
                            std::to_string(whole_.stride(4)));
  }
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(key_, "key_cache", 4));
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(value_, "value_cache", 4));
  const bool same_shape =
      std::equal(key_.shape().begin(), key_.shape().end(), value_.shape().begin());
  const bool same_strides =
      std::equal(key_.strides().begin(), key_.strides().end(), value_.strides().begin());
  if (!same_shape || key_.dtype() != value_.dtype() || !(key_.device() == value_.device())) {
    return invalid_argument("key_cache " + key_.describe() + " and value_cache " +
                            value_.describe() + " must have one shape, dtype and device");
  }
  if (!same_strides) {
    return invalid_argument("key_cache " + key_.describe() + " and value_cache " +
                            value_.describe() +
                            " must have the same strides (the kernels address both planes with one "
                            "set)");
  }
  if (key_.stride(3) != 1) {
    return invalid_argument(
        "key_cache and value_cache must have unit stride along head_size, got " +
        std::to_string(key_.stride(3)));
  }
  return ok_status();
}

std::string KVCacheView::describe() const {
  if (whole_.defined()) return "kv_cache " + whole_.describe();
  return "key_cache " + key_.describe() + ", value_cache " + value_.describe();
}

KVCacheStrideOrder get_kv_cache_stride_order(KVCacheLayout layout) {
  if (layout == KVCacheLayout::kHND) return {0, 1, 3, 2, 4};
  return {0, 1, 2, 3, 4};
}

std::array<int64_t, 5> kv_cache_strides(const KVCacheShape& shape, KVCacheLayout layout) {
  const KVCacheStrideOrder order = get_kv_cache_stride_order(layout);
  std::array<int64_t, 5> strides{};
  int64_t stride = 1;
  for (int i = 4; i >= 0; --i) {  // physical dims, innermost first
    strides[order[i]] = stride;
    stride *= shape[order[i]];
  }
  return strides;
}

StatusOr<int64_t> kv_cache_bytes_per_block(int block_size, int num_kv_heads, int head_size,
                                           DType storage) {
  if (block_size <= 0 || num_kv_heads <= 0 || head_size <= 0) {
    return invalid_argument("kv_cache_bytes_per_block: block_size = " + std::to_string(block_size) +
                            ", num_kv_heads = " + std::to_string(num_kv_heads) +
                            ", head_size = " + std::to_string(head_size) + ": each must be > 0");
  }
  const std::optional<int64_t> bytes = checked_product(
      {2, block_size, num_kv_heads, head_size, static_cast<int64_t>(dtype_size(storage))});
  if (!bytes) {
    return out_of_range("bytes of one KV-cache block (2 x " + std::to_string(block_size) + " x " +
                        std::to_string(num_kv_heads) + " x " + std::to_string(head_size) + " x " +
                        std::to_string(dtype_size(storage)) + ") overflow int64");
  }
  return *bytes;
}

KVCacheLayout get_kv_cache_layout() {
  return layout_setting().load();
}
void set_kv_cache_layout(KVCacheLayout layout) {
  layout_setting().store(layout);
}

StatusOr<KVCacheAllocation> KVCacheAllocation::allocate(const KVCacheShape& shape, DType storage,
                                                        KVCacheLayout layout, Device device) {
  // Dims 2..4 are int in the geometry functions: range-check before narrowing (2^32 + 16 is not
  // 16).
  static constexpr const char* kDimNames[] = {"num_blocks", "2", "block_size", "num_kv_heads",
                                              "head_size"};
  for (int d = 2; d < 5; ++d) {
    if (shape[d] < 1 || shape[d] > std::numeric_limits<int32_t>::max()) {
      return invalid_argument("KV-cache shape dim " + std::to_string(d) + " (" + kDimNames[d] +
                              ") = " + std::to_string(shape[d]) + ": allowed [1, 2147483647]");
    }
  }
  PAGEDATTN_ASSIGN_OR_RETURN(
      KVCacheShape checked,
      get_kv_cache_shape(shape[0], static_cast<int>(shape[2]), static_cast<int>(shape[3]),
                         static_cast<int>(shape[4])));
  if (shape[1] != 2) {
    return invalid_argument("KV-cache shape dim 1 must be 2 (K and V), got " +
                            std::to_string(shape[1]));
  }
  if (!is_floating(storage)) {
    return invalid_argument("KV-cache storage dtype " + std::string(dtype_name(storage)) +
                            " is not allowed; allowed: f32, f16, bf16, fp8_e4m3, fp8_e5m2");
  }
  PAGEDATTN_ASSIGN_OR_RETURN(
      const int64_t per_block,
      kv_cache_bytes_per_block(static_cast<int>(checked[2]), static_cast<int>(checked[3]),
                               static_cast<int>(checked[4]), storage));
  const std::optional<int64_t> bytes = checked_mul(checked[0], per_block);
  if (!bytes) {
    return out_of_range("KV cache of " + std::to_string(checked[0]) + " blocks of " +
                        std::to_string(per_block) + " bytes overflows int64");
  }
  KVCacheAllocation alloc;
  if (device.is_cpu()) {
    alloc.memory_ = runtime::host_malloc_paged(static_cast<size_t>(*bytes));
    if (alloc.memory_ == nullptr) {
      return out_of_range("host allocation of " + std::to_string(*bytes) +
                          " bytes failed (the KV cache)");
    }
  } else {
    PAGEDATTN_RETURN_IF_ERROR(
        runtime::device_malloc(device.index, static_cast<size_t>(*bytes), &alloc.memory_));
  }
  const std::array<int64_t, 5> strides = kv_cache_strides(checked, layout);
  alloc.view_ = TensorView(alloc.memory_, storage, device, checked, strides);
  alloc.layout_ = layout;
  return alloc;
}

KVCacheAllocation::KVCacheAllocation(KVCacheAllocation&& other) noexcept
    : view_(other.view_), layout_(other.layout_), memory_(other.memory_) {
  other.memory_ = nullptr;
  other.view_ = TensorView();
}

KVCacheAllocation& KVCacheAllocation::operator=(KVCacheAllocation&& other) noexcept {
  if (this != &other) {
    release();
    view_ = other.view_;
    layout_ = other.layout_;
    memory_ = other.memory_;
    other.memory_ = nullptr;
    other.view_ = TensorView();
  }
  return *this;
}

KVCacheAllocation::~KVCacheAllocation() {
  release();
}

void KVCacheAllocation::release() {
  if (memory_ != nullptr) {
    if (view_.device().is_cpu()) {
      std::free(memory_);
    } else {
      runtime::device_free(view_.device().index, memory_);
    }
  }
  memory_ = nullptr;
  view_ = TensorView();
}

}  // namespace pagedattn
