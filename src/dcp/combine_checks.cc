// Argument checks of the DCP combine paths.
#include "dcp/combine_checks.h"

#include <string>

#include "pagedattn/config.h"

namespace pagedattn::dcp {
namespace {

// Where the combine runs: the communicator's device, with a stream only on a CUDA device.
Status check_placement(const std::string& path, const Communicator& comm, StreamHandle stream) {
  const Device device = comm.device();
  if (device.is_cpu()) {
    if (stream != nullptr) {
      return invalid_argument(path +
                              ": stream must be null for host buffers (the combine finishes "
                              "before it returns)");
    }
    return ok_status();
  }
  if (!PAGEDATTN_WITH_CUDA) {
    return unimplemented(path + ": the communicator's buffers live on " + device_name(device) +
                         "; this build has no CUDA support (allowed: a host communicator)");
  }
  return ok_status();
}

Status check_buffer(const std::string& path, const TensorView& t, std::string_view what,
                    const Device& device) {
  if (!t.defined()) return invalid_argument(path + ": " + std::string(what) + " is required");
  if (t.device() != device) {
    return invalid_argument(path + ": " + std::string(what) + " is on " + device_name(t.device()) +
                            "; the communicator's buffers live on " + device_name(device) +
                            " (every buffer must)");
  }
  if (t.numel() > 0 && t.data() == nullptr) {
    return invalid_argument(path + ": " + std::string(what) + " has a null pointer");
  }
  return ok_status();
}

}  // namespace

StatusOr<CombineShape> check_combine(std::string_view path, const Communicator& comm,
                                     const TensorView& partial_out, const TensorView& partial_lse,
                                     const TensorView& out, const TensorView& out_lse,
                                     StreamHandle stream) {
  const std::string p(path);
  PAGEDATTN_RETURN_IF_ERROR(check_placement(p, comm, stream));
  for (const auto& [t, what] : {std::pair{&partial_out, "partial_out"},
                                std::pair{&partial_lse, "partial_lse"}, std::pair{&out, "out"},
                                std::pair{&out_lse, "out_lse"}}) {
    PAGEDATTN_RETURN_IF_ERROR(check_buffer(p, *t, what, comm.device()));
  }
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(partial_out, p + ": partial_out", 3));
  PAGEDATTN_RETURN_IF_ERROR(
      expect_dtype(partial_out, p + ": partial_out", {DType::kF32, DType::kF16, DType::kBF16}));
  CombineShape shape{partial_out.size(0), partial_out.size(1), partial_out.size(2), 0};
  const int world_size = comm.world_size();
  if (shape.num_heads % world_size != 0) {
    return invalid_argument(p + ": partial_out has " + std::to_string(shape.num_heads) +
                            " heads; must be a multiple of world_size (" +
                            std::to_string(world_size) + "): each rank gets H / N of them");
  }
  shape.heads_per_rank = shape.num_heads / world_size;
  PAGEDATTN_RETURN_IF_ERROR(
      expect_shape(partial_lse, p + ": partial_lse", {shape.num_heads, shape.num_tokens}));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(partial_lse, p + ": partial_lse", {DType::kF32}));
  PAGEDATTN_RETURN_IF_ERROR(
      expect_shape(out, p + ": out", {shape.num_tokens, shape.heads_per_rank, shape.head_size}));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(out, p + ": out", {partial_out.dtype()}));
  if (!out.is_contiguous()) {
    return invalid_argument(p + ": out must be contiguous (a collective writes it); got " +
                            out.describe());
  }
  PAGEDATTN_RETURN_IF_ERROR(
      expect_shape(out_lse, p + ": out_lse", {shape.heads_per_rank, shape.num_tokens}));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(out_lse, p + ": out_lse", {DType::kF32}));
  return shape;
}

}  // namespace pagedattn::dcp
