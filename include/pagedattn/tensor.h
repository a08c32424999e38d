// TensorView: a non-owning view (pointer, dtype, device, shape, int64 strides in elements).
//
// What the library can and cannot check about a view: a shape with more than kMaxRank dims, a
// negative size, or an element count whose bytes overflow int64 leaves the view undefined (rejected
// by every expect_* check). The extent of the memory behind the pointer is the caller's promise: no
// check can tell whether `data` really holds the elements the shape and strides address, nor what a
// device pointer holds. Host views that the library reads (the metadata's host copies, CPU_ATTN's
// inputs) must have non-null data; their contents are validated, device contents are not.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "pagedattn/status.h"
#include "pagedattn/types.h"

namespace pagedattn {

class TensorView {
 public:
  static constexpr int kMaxRank = 6;

  TensorView() = default;
  // Contiguous (row-major) view.
  TensorView(void* data, DType dtype, Device device, std::initializer_list<int64_t> shape);
  TensorView(void* data, DType dtype, Device device, std::span<const int64_t> shape);
  // View with explicit strides (in elements).
  TensorView(void* data, DType dtype, Device device, std::span<const int64_t> shape,
             std::span<const int64_t> strides);

  bool defined() const { return data_ != nullptr || rank_ > 0; }
  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  const Device& device() const { return device_; }
  int rank() const { return rank_; }
  int64_t size(int dim) const { return shape_[dim]; }
  int64_t stride(int dim) const { return strides_[dim]; }
  std::span<const int64_t> shape() const { return {shape_.data(), static_cast<size_t>(rank_)}; }
  std::span<const int64_t> strides() const { return {strides_.data(), static_cast<size_t>(rank_)}; }

  int64_t numel() const;
  int64_t nbytes() const { return numel() * static_cast<int64_t>(dtype_size(dtype_)); }
  bool is_contiguous() const;
  // Reorders the dims: result dim i is this view's dim order[i]. Fails on a bad permutation.
  StatusOr<TensorView> permute(std::span<const int> order) const;
  // Sub-range [start, start + length) along dim 0 (no copy).
  StatusOr<TensorView> slice0(int64_t start, int64_t length) const;
  std::string describe() const;  // "bf16[4, 32, 128] cuda:0"

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Device device_;
  int rank_ = 0;
  std::array<int64_t, kMaxRank> shape_{};
  std::array<int64_t, kMaxRank> strides_{};
};

// Checks used by every backend's argument validation; messages name `what`.
Status expect_rank(const TensorView& t, std::string_view what, int rank);
Status expect_dtype(const TensorView& t, std::string_view what,
                    std::initializer_list<DType> allowed);
Status expect_shape(const TensorView& t, std::string_view what,
                    std::initializer_list<int64_t> shape);
Status expect_device(const TensorView& t, std::string_view what, const Device& device);

}  // namespace pagedattn
