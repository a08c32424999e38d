// A layer's per-head parameters on its device, uploaded once by make_impl: ALiBi slopes, sink
// logits, and the unit FP8 scale the kernels read when a call gives no scales. Needs the CUDA
// runtime (include from *_cuda.cc only).
#pragma once

#include "pagedattn/backend.h"
#include "runtime/device_buffer.h"

namespace pagedattn::gpu {

class HeadParams {
 public:
  static StatusOr<HeadParams> upload(const AttentionImplParams& params);

  const float* alibi_slopes() const { return alibi_.as<const float>(); }  // [Hq] or nullptr
  const float* sinks() const { return sinks_.as<const float>(); }         // [Hq] or nullptr
  // The scale's device data, or the unit scale [1] = 1.0 when the view is undefined.
  const float* scale_or_unit(const TensorView& scale) const {
    return scale.defined() ? scale.data_as<const float>() : unit_scale_.as<const float>();
  }

 private:
  runtime::DeviceBuffer alibi_;
  runtime::DeviceBuffer sinks_;
  runtime::DeviceBuffer unit_scale_;
};

}  // namespace pagedattn::gpu
