// Output rows are stored once per task: plain C++, bf16 inline so that the loop vectorises.
#include "backends/cpu/output_rows.h"

#include <bit>

#include "common/numeric.h"

namespace pagedattn::cpu {
namespace {

// As float_to_bf16_bits (common/numeric.h), branch-free: NaN stays a quiet NaN.
inline uint16_t to_bf16(float x) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (f + 0x7FFFu + ((f >> 16) & 1u)) >> 16;
  const uint32_t nan = 0u - static_cast<uint32_t>((f & 0x7FFFFFFFu) > 0x7F800000u);
  return static_cast<uint16_t>((rounded & ~nan) | (((f >> 16) | 0x40u) & nan));
}

}  // namespace

void store_output_row(const float* src, int n, float multiplier, DType dtype, void* dst,
                      int64_t offset) {
  switch (dtype) {
    case DType::kF32: {
      float* p = static_cast<float*>(dst) + offset;
      for (int d = 0; d < n; ++d) p[d] = src[d] * multiplier;
      return;
    }
    case DType::kBF16: {
      uint16_t* p = static_cast<uint16_t*>(dst) + offset;
      for (int d = 0; d < n; ++d) p[d] = to_bf16(src[d] * multiplier);
      return;
    }
    default: {
      uint16_t* p = static_cast<uint16_t*>(dst) + offset;
      for (int d = 0; d < n; ++d) p[d] = float_to_f16_bits(src[d] * multiplier);
      return;
    }
  }
}

}  // namespace pagedattn::cpu
