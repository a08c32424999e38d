// Host conversions between float and the 16-bit and FP8 storage formats. Bit-exact against the
// format definitions (round to nearest even; FP8 saturates to the largest finite value, NaN stays
// NaN). The CUDA kernels encode with the same rules (src/device/fp8.cuh) and are tested against these.
#pragma once

#include <cstdint>

#include "pagedattn/types.h"

namespace pagedattn {

uint16_t float_to_f16_bits(float x);
float f16_bits_to_float(uint16_t bits);
uint16_t float_to_bf16_bits(float x);
float bf16_bits_to_float(uint16_t bits);

uint8_t float_to_fp8_e4m3(float x);  // saturating, RNE; max finite 448
float fp8_e4m3_to_float(uint8_t bits);
uint8_t float_to_fp8_e5m2(float x);  // saturating, RNE; max finite 57344
float fp8_e5m2_to_float(uint8_t bits);

// Element i of a buffer of `dtype` (f32, f16, bf16, fp8_e4m3, fp8_e5m2) as float.
float load_as_float(const void* data, DType dtype, int64_t index);
// Stores x rounded (and for FP8 saturated) to `dtype`.
void store_from_float(void* data, DType dtype, int64_t index, float x);

}  // namespace pagedattn
