// The two combine paths on device buffers (docs/dcp.md): each step a small kernel
// (combine_kernels.h) or a collective of the Communicator, all enqueued on the caller's stream,
// with stream-ordered scratch. The arithmetic is the host paths': ag_rs rounds each rank's scaled
// output to the dtype before the reduce-scatter, a2a rounds once after its local merge.
#include <cuda_runtime.h>

#include "dcp/combine_kernels.h"
#include "dcp/combine_paths.h"
#include "dcp/stream_scratch.h"
#include "runtime/check.h"

namespace pagedattn::dcp {
namespace {

TensorView flat(void* data, DType dtype, const Device& device, int64_t count) {
  return TensorView(data, dtype, device, {count});
}

}  // namespace

Status combine_ag_rs_on_device(Communicator& comm, const CombineShape& shape,
                               const TensorView& partial_out, const TensorView& partial_lse,
                               const TensorView& out, const TensorView& out_lse,
                               StreamHandle stream) {
  const Device device = comm.device();
  runtime::ScopedDevice guard(device.index);
  PAGEDATTN_RETURN_IF_ERROR(guard.status());
  const int world_size = comm.world_size();
  const DType dtype = partial_out.dtype();
  const int64_t lses = shape.num_heads * shape.num_tokens;
  const int64_t rows = shape.num_tokens * shape.num_heads * shape.head_size;
  PAGEDATTN_ASSIGN_OR_RETURN(
      const StreamScratch scratch,
      StreamScratch::allocate(
          {4 * static_cast<size_t>(lses), 4 * static_cast<size_t>(world_size * lses),
           dtype_size(dtype) * static_cast<size_t>(rows)},
          static_cast<cudaStream_t>(stream)));
  float* local_lse = scratch.part<float>(0);  // [H, T]
  float* all_lse = scratch.part<float>(1);    // [N, H, T]
  void* scaled = scratch.part<void>(2);       // [N, T, H / N, D]

  PAGEDATTN_RETURN_IF_ERROR(
      launch_pack_partials(shape, partial_out, partial_lse, nullptr, local_lse, stream));
  PAGEDATTN_RETURN_IF_ERROR(comm.all_gather(flat(local_lse, DType::kF32, device, lses),
                                            flat(all_lse, DType::kF32, device, world_size * lses),
                                            stream));
  PAGEDATTN_RETURN_IF_ERROR(launch_ag_rs_scale(shape, world_size, comm.rank(), partial_out, all_lse,
                                               scaled, out_lse, stream));
  return comm.reduce_scatter(flat(scaled, dtype, device, rows),
                             flat(out.data(), dtype, device, out.numel()), stream);
}

Status combine_a2a_on_device(Communicator& comm, const CombineShape& shape,
                             const TensorView& partial_out, const TensorView& partial_lse,
                             const TensorView& out, const TensorView& out_lse,
                             StreamHandle stream) {
  const Device device = comm.device();
  runtime::ScopedDevice guard(device.index);
  PAGEDATTN_RETURN_IF_ERROR(guard.status());
  const DType dtype = partial_out.dtype();
  const int64_t lses = shape.num_heads * shape.num_tokens;
  const int64_t rows = shape.num_tokens * shape.num_heads * shape.head_size;
  const size_t row_bytes = dtype_size(dtype) * static_cast<size_t>(rows);
  PAGEDATTN_ASSIGN_OR_RETURN(const StreamScratch scratch,
                             StreamScratch::allocate({row_bytes, 4 * static_cast<size_t>(lses),
                                                      row_bytes, 4 * static_cast<size_t>(lses)},
                                                     static_cast<cudaStream_t>(stream)));
  void* send_out = scratch.part<void>(0);    // [N, T, H / N, D]: chunk s for rank s
  float* send_lse = scratch.part<float>(1);  // [H, T] = [N, H / N, T]
  void* recv_out = scratch.part<void>(2);    // [N, T, H / N, D]: chunk s from rank s
  float* recv_lse = scratch.part<float>(3);  // [N, H / N, T]

  PAGEDATTN_RETURN_IF_ERROR(
      launch_pack_partials(shape, partial_out, partial_lse, send_out, send_lse, stream));
  PAGEDATTN_RETURN_IF_ERROR(comm.all_to_all(flat(send_out, dtype, device, rows),
                                            flat(recv_out, dtype, device, rows), stream));
  PAGEDATTN_RETURN_IF_ERROR(comm.all_to_all(flat(send_lse, DType::kF32, device, lses),
                                            flat(recv_lse, DType::kF32, device, lses), stream));
  return launch_a2a_reduce(shape, comm.world_size(), recv_out, recv_lse, out, out_lse, stream);
}

}  // namespace pagedattn::dcp
