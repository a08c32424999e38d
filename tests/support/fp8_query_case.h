// A case for dequantize_fp8_query, shared by its CPU and CUDA tests: random e4m3 query bytes (NaN
// and both zeros among them) in a [T, H, D] view of a wider buffer, a scale (none, [1] or per
// request and KV head with cu_seqlens_q, empty requests and padding tokens included), and the
// expected output, computed here: the library's host decode times the scale, rounded once.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/numeric.h"
#include "pagedattn/types.h"

namespace pagedattn::testing {

enum class Fp8QueryScale { kNone, kPerTensor, kPerRequest };

struct Fp8QueryCase {
  int64_t tokens, heads, head_size, kv_heads;
  Fp8QueryScale scale_kind;
  int64_t row_pad;  // extra bytes after each token's row: a strided view
  DType out_dtype;

  std::vector<uint8_t> query;  // tokens x (heads * head_size + row_pad) bytes
  std::vector<float> scale;    // [1] or [num_reqs, kv_heads]
  std::vector<int32_t> cu_seqlens_q;

  int64_t token_stride() const { return heads * head_size + row_pad; }
  int64_t num_reqs() const { return static_cast<int64_t>(cu_seqlens_q.size()) - 1; }

  Fp8QueryCase(int64_t t, int64_t h, int64_t d, int64_t kv, Fp8QueryScale kind, int64_t pad,
               DType dtype, uint32_t seed)
      : tokens(t),
        heads(h),
        head_size(d),
        kv_heads(kv),
        scale_kind(kind),
        row_pad(pad),
        out_dtype(dtype) {
    std::mt19937 rng(seed);
    query.resize(tokens * token_stride());
    for (uint8_t& b : query) b = static_cast<uint8_t>(rng());
    query[0] = 0x7F;  // NaN
    query[1] = 0x80;  // -0
    // Requests of 0 to 9 tokens; the tokens past the last one are padding.
    cu_seqlens_q = {0};
    while (cu_seqlens_q.back() + 9 < tokens) {
      cu_seqlens_q.push_back(cu_seqlens_q.back() + static_cast<int32_t>(rng() % 10));
    }
    std::uniform_real_distribution<float> positive(0.01f, 4.0f);
    if (scale_kind == Fp8QueryScale::kPerTensor) scale = {positive(rng)};
    if (scale_kind == Fp8QueryScale::kPerRequest) {
      scale.resize(num_reqs() * kv_heads);
      for (float& s : scale) s = positive(rng);
    }
  }

  // The scale of (token, head).
  float scale_of(int64_t t, int64_t h) const {
    if (scale_kind == Fp8QueryScale::kNone) return 1.0f;
    if (scale_kind == Fp8QueryScale::kPerTensor) return scale[0];
    int64_t r = 0;
    while (r + 1 < num_reqs() && cu_seqlens_q[r + 1] <= t) ++r;
    return scale[r * kv_heads + h / (heads / kv_heads)];
  }

  // Element (t, h, i) as expected, in float (the output dtype's value).
  float expected(int64_t t, int64_t h, int64_t i) const {
    const float x = fp8_e4m3_to_float(query[t * token_stride() + h * head_size + i]);
    uint16_t bits[2] = {};
    store_from_float(bits, out_dtype, 0, x * scale_of(t, h));
    return load_as_float(bits, out_dtype, 0);
  }
};

// Whether `have` is `want` exactly (NaN for NaN, the sign of zero included).
inline bool same_value(float have, float want) {
  if (std::isnan(want)) return std::isnan(have);
  return have == want && std::signbit(have) == std::signbit(want);
}

}  // namespace pagedattn::testing
