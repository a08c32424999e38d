// lse_weights (lse_weights.h) on the device: the same rule, operation for operation (explicitly
// rounded adds, products and quotients, so that nvcc fuses none), for one row whose N LSEs lie
// `stride` floats apart. Only expf and logf differ from the host's: CUDA's and the C library's may
// round an ulp apart.
#pragma once

#include <cmath>

namespace pagedattn::dcp {

class DeviceLseWeights {
 public:
  __device__ DeviceLseWeights(const float* lses, int64_t stride, int world_size)
      : lses_(lses), stride_(stride) {
    for (int s = 0; s < world_size; ++s) {
      const float lse = lses[s * stride];
      if (isnan(lse)) {
        nan_ = lse;
        return;
      }
      if (!isinf(lse)) max_ = fmaxf(max_, lse);
    }
    if (max_ == -INFINITY) return;  // no rank has a key: rank 0 weighs 1
    for (int s = 0; s < world_size; ++s) {
      const float lse = lses[s * stride];
      if (!isinf(lse)) sum_ = __fadd_rn(sum_, expf(__fsub_rn(lse, max_)));
    }
  }

  // Rank s's weight in the combined output (0 for an empty rank; NaN when a LSE is NaN).
  __device__ float weight(int s) const {
    if (isnan(nan_)) return nan_;
    if (max_ == -INFINITY) return s == 0 ? 1.0f : 0.0f;
    const float lse = lses_[s * stride_];
    if (isinf(lse)) return 0.0f;
    return __fdiv_rn(expf(__fsub_rn(lse, max_)), sum_);
  }

  // The combined LSE: -inf when every rank is empty, the NaN when one is NaN.
  __device__ float lse() const {
    if (isnan(nan_)) return nan_;
    if (max_ == -INFINITY) return -INFINITY;
    return __fadd_rn(max_, logf(sum_));
  }

 private:
  const float* lses_;
  int64_t stride_;
  float nan_ = 0.0f;  // the first NaN LSE, if any
  float max_ = -INFINITY;
  float sum_ = 0.0f;
};

}  // namespace pagedattn::dcp
