#include "backends/gpu/head_params.h"

#include <vector>

namespace pagedattn::gpu {
namespace {

using runtime::DeviceBuffer;

StatusOr<DeviceBuffer> upload_floats(const std::vector<float>& host, int device) {
  PAGEDATTN_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::allocate(device, 4 * host.size()));
  if (host.empty()) return buffer;
  runtime::ScopedDevice guard(device);
  PAGEDATTN_RETURN_IF_ERROR(guard.status());
  PAGEDATTN_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(buffer.data(), host.data(), 4 * host.size(), cudaMemcpyHostToDevice),
      "uploading per-head parameters");
  return buffer;
}

}  // namespace

StatusOr<HeadParams> HeadParams::upload(const AttentionImplParams& params) {
  const int dev = params.device.index;
  HeadParams out;
  PAGEDATTN_ASSIGN_OR_RETURN(out.alibi_, upload_floats(params.alibi_slopes, dev));
  PAGEDATTN_ASSIGN_OR_RETURN(out.sinks_, upload_floats(params.sinks, dev));
  PAGEDATTN_ASSIGN_OR_RETURN(out.unit_scale_, upload_floats({1.0f}, dev));
  return out;
}

}  // namespace pagedattn::gpu
