// Argument checks shared by the Communicator implementations.
#include "dcp/collective_checks.h"

#include <string>

namespace pagedattn::dcp {
namespace {

std::string prefix(CollectiveKind kind, std::string_view buffer) {
  return std::string(collective_kind_name(kind)) + ": " + std::string(buffer);
}

Status check_buffer(CollectiveKind kind, const TensorView& t, std::string_view what,
                    const Device& device) {
  if (!t.defined()) return invalid_argument(prefix(kind, what) + " is required");
  const bool reduces = kind == CollectiveKind::kReduceScatter;
  if (reduces) {
    PAGEDATTN_RETURN_IF_ERROR(
        expect_dtype(t, prefix(kind, what), {DType::kF32, DType::kF16, DType::kBF16}));
  } else {
    PAGEDATTN_RETURN_IF_ERROR(expect_dtype(
        t, prefix(kind, what), {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64}));
  }
  PAGEDATTN_RETURN_IF_ERROR(expect_device(t, prefix(kind, what), device));
  if (!t.is_contiguous()) {
    return invalid_argument(prefix(kind, what) + " must be contiguous; got " + t.describe());
  }
  if (t.numel() > 0 && t.data() == nullptr) {
    return invalid_argument(prefix(kind, what) + " has " + std::to_string(t.numel()) +
                            " elements and a null pointer");
  }
  return ok_status();
}

Status expect_count(CollectiveKind kind, std::string_view what, int64_t count, int64_t expected,
                    const std::string& rule) {
  if (count == expected) return ok_status();
  return invalid_argument(prefix(kind, what) + " has " + std::to_string(count) +
                          " elements; must be " + rule + " = " + std::to_string(expected));
}

bool overlaps(const TensorView& a, const TensorView& b) {
  const auto* a_begin = static_cast<const char*>(a.data());
  const auto* b_begin = static_cast<const char*>(b.data());
  return a.nbytes() > 0 && b.nbytes() > 0 && a_begin < b_begin + b.nbytes() &&
         b_begin < a_begin + a.nbytes();
}

}  // namespace

StatusOr<CollectiveSignature> check_collective(CollectiveKind kind, const TensorView& send,
                                               const TensorView& recv, int world_size,
                                               const Device& device) {
  PAGEDATTN_RETURN_IF_ERROR(check_buffer(kind, send, "send", device));
  PAGEDATTN_RETURN_IF_ERROR(check_buffer(kind, recv, "recv", device));
  if (recv.dtype() != send.dtype()) {
    return invalid_argument(prefix(kind, "recv") + " dtype " + std::string(dtype_name(recv.dtype())) +
                            " must equal send's " + std::string(dtype_name(send.dtype())));
  }
  const int64_t n = world_size;
  const std::string ws = "world_size (" + std::to_string(world_size) + ")";
  switch (kind) {
    case CollectiveKind::kAllGather:
      PAGEDATTN_RETURN_IF_ERROR(expect_count(kind, "recv", recv.numel(), n * send.numel(),
                                             ws + " * send's " + std::to_string(send.numel())));
      break;
    case CollectiveKind::kReduceScatter:
      PAGEDATTN_RETURN_IF_ERROR(expect_count(kind, "send", send.numel(), n * recv.numel(),
                                             ws + " * recv's " + std::to_string(recv.numel())));
      break;
    case CollectiveKind::kAllToAll:
      if (send.numel() % n != 0) {
        return invalid_argument(prefix(kind, "send") + " has " + std::to_string(send.numel()) +
                                " elements; must be a multiple of " + ws);
      }
      PAGEDATTN_RETURN_IF_ERROR(
          expect_count(kind, "recv", recv.numel(), send.numel(), "send's element count"));
      break;
  }
  if (overlaps(send, recv)) {
    return invalid_argument(prefix(kind, "send") + " and recv overlap; they must be separate buffers");
  }
  return CollectiveSignature{kind, send.dtype(), send.numel(), recv.numel()};
}

}  // namespace pagedattn::dcp
