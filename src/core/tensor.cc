// TensorView: construction, shape helpers and the argument checks every backend uses.
#include "pagedattn/tensor.h"

#include <algorithm>
#include <cstddef>

#include "common/checked_math.h"

namespace pagedattn {
namespace {

std::string join(std::span<const int64_t> values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values[i]);
  }
  return out;
}

// A shape a view can hold: rank <= kMaxRank, no negative size, and numel * element size fits int64
// (so numel(), nbytes() and every offset computed from them are exact).
bool representable(std::span<const int64_t> shape, DType dtype) {
  if (shape.size() > static_cast<size_t>(TensorView::kMaxRank)) return false;
  int64_t bytes = static_cast<int64_t>(dtype_size(dtype));
  for (int64_t s : shape) {
    if (s < 0) return false;
    const std::optional<int64_t> next = checked_mul(bytes, s);
    if (!next) return false;
    bytes = *next;
  }
  return true;
}

}  // namespace

TensorView::TensorView(void* data, DType dtype, Device device, std::initializer_list<int64_t> shape)
    : TensorView(data, dtype, device, std::span<const int64_t>(shape.begin(), shape.size())) {}

TensorView::TensorView(void* data, DType dtype, Device device, std::span<const int64_t> shape)
    : data_(data), dtype_(dtype), device_(device) {
  // A shape the view cannot hold (see representable) leaves it undefined, which every expect_*
  // check rejects.
  if (!representable(shape, dtype)) {
    data_ = nullptr;
    return;
  }
  rank_ = static_cast<int>(shape.size());
  int64_t stride = 1;
  for (int d = rank_ - 1; d >= 0; --d) {
    shape_[d] = shape[d];
    strides_[d] = stride;
    stride *= std::max<int64_t>(shape[d], 1);
  }
}

TensorView::TensorView(void* data, DType dtype, Device device, std::span<const int64_t> shape,
                       std::span<const int64_t> strides)
    : data_(data), dtype_(dtype), device_(device) {
  if (!representable(shape, dtype) || strides.size() != shape.size()) {
    data_ = nullptr;
    return;
  }
  rank_ = static_cast<int>(shape.size());
  std::copy(shape.begin(), shape.end(), shape_.begin());
  std::copy(strides.begin(), strides.end(), strides_.begin());
}

int64_t TensorView::numel() const {
  if (!defined()) return 0;
  int64_t n = 1;
  for (int d = 0; d < rank_; ++d) n *= shape_[d];
  return n;
}

bool TensorView::is_contiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int d = rank_ - 1; d >= 0; --d) {
    if (shape_[d] != 1 && strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

StatusOr<TensorView> TensorView::permute(std::span<const int> order) const {
  if (static_cast<int>(order.size()) != rank_) {
    return invalid_argument("permute order has " + std::to_string(order.size()) +
                            " entries; the tensor has rank " + std::to_string(rank_));
  }
  std::array<bool, kMaxRank> seen{};
  TensorView out = *this;
  for (int i = 0; i < rank_; ++i) {
    const int src = order[i];
    if (src < 0 || src >= rank_ || seen[src]) {
      return invalid_argument("permute order is not a permutation of 0.." +
                              std::to_string(rank_ - 1) + " (entry " + std::to_string(i) + " is " +
                              std::to_string(src) + ")");
    }
    seen[src] = true;
    out.shape_[i] = shape_[src];
    out.strides_[i] = strides_[src];
  }
  return out;
}

StatusOr<TensorView> TensorView::slice0(int64_t start, int64_t length) const {
  if (rank_ < 1) return invalid_argument("slice0 needs a tensor of rank >= 1, got rank 0");
  if (start < 0 || length < 0 || start > shape_[0] || length > shape_[0] - start) {
    return out_of_range("slice0 start " + std::to_string(start) + ", length " +
                        std::to_string(length) + " is outside dim 0 of size " +
                        std::to_string(shape_[0]));
  }
  // The strides are the caller's: the byte offset is checked, not assumed to fit.
  const std::optional<int64_t> offset =
      checked_product({start, strides_[0], static_cast<int64_t>(dtype_size(dtype_))});
  if (!offset) {
    return out_of_range("slice0 start " + std::to_string(start) + " x stride " +
                        std::to_string(strides_[0]) + " overflows int64");
  }
  TensorView out = *this;
  out.shape_[0] = length;
  if (data_ != nullptr) out.data_ = static_cast<std::byte*>(data_) + *offset;
  return out;
}

std::string TensorView::describe() const {
  if (!defined()) return "undefined";
  std::string out = std::string(dtype_name(dtype_)) + "[" + join(shape()) + "]";
  if (!is_contiguous()) out += " strides [" + join(strides()) + "]";
  return out + " " + device_name(device_);
}

Status expect_rank(const TensorView& t, std::string_view what, int rank) {
  if (!t.defined()) {
    return invalid_argument(std::string(what) + " is missing (expected a rank-" +
                            std::to_string(rank) + " tensor)");
  }
  if (t.rank() != rank) {
    return invalid_argument(std::string(what) + " must have rank " + std::to_string(rank) +
                            ", got " + t.describe());
  }
  return ok_status();
}

Status expect_dtype(const TensorView& t, std::string_view what,
                    std::initializer_list<DType> allowed) {
  if (std::find(allowed.begin(), allowed.end(), t.dtype()) != allowed.end()) return ok_status();
  std::string names;
  for (DType d : allowed) {
    if (!names.empty()) names += ", ";
    names += dtype_name(d);
  }
  return invalid_argument(std::string(what) + " has dtype " + std::string(dtype_name(t.dtype())) +
                          "; allowed: " + names);
}

// A -1 entry in `shape` accepts any size in that dim.
Status expect_shape(const TensorView& t, std::string_view what,
                    std::initializer_list<int64_t> shape) {
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(t, what, static_cast<int>(shape.size())));
  int d = 0;
  for (int64_t want : shape) {
    if (want >= 0 && t.size(d) != want) {
      std::string expected;
      for (int64_t s : shape) {
        if (!expected.empty()) expected += ", ";
        expected += s < 0 ? std::string("*") : std::to_string(s);
      }
      return invalid_argument(std::string(what) + " must have shape [" + expected + "], got " +
                              t.describe());
    }
    ++d;
  }
  return ok_status();
}

Status expect_device(const TensorView& t, std::string_view what, const Device& device) {
  if (t.device() == device) return ok_status();
  return invalid_argument(std::string(what) + " is on " + device_name(t.device()) + "; expected " +
                          device_name(device));
}

}  // namespace pagedattn
