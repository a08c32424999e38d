// A step's query in e4m3, as vLLM's FP8 attention passes it: each value of the batch's query
// divided by its scale (per request and KV head, q_scale [num_reqs, Hkv]) and rounded to e4m3. The
// batch's query then holds what the codes stand for (code times scale, rounded to the batch's
// dtype: dequantize_fp8_query's values), so that a step over the batch is the reference for a
// forward over the codes.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/numeric.h"
#include "testing/host_batch.h"

namespace pagedattn::testing {

struct Fp8StepQuery {
  std::vector<uint8_t> codes;  // [T, Hq, D]
  std::vector<float> scale;    // [num_reqs, Hkv]
};

inline Fp8StepQuery quantize_step_query(
    HostBatch& batch, const std::function<float(int req, int kv_head)>& scale_of) {
  const CaseSpec& spec = batch.spec;
  const int reqs = spec.num_reqs(), group = spec.num_heads / spec.num_kv_heads;
  Fp8StepQuery q;
  q.scale.resize(static_cast<size_t>(reqs) * spec.num_kv_heads);
  for (int r = 0; r < reqs; ++r) {
    for (int h = 0; h < spec.num_kv_heads; ++h) q.scale[r * spec.num_kv_heads + h] = scale_of(r, h);
  }
  const TensorView& query = batch.query.view();
  q.codes.resize(static_cast<size_t>(query.numel()));
  const int32_t* starts = batch.query_start_loc.data<int32_t>();
  for (int r = 0; r < reqs; ++r) {
    for (int64_t t = starts[r]; t < starts[r + 1]; ++t) {
      for (int64_t h = 0; h < spec.num_heads; ++h) {
        const float s = q.scale[r * spec.num_kv_heads + h / group];
        for (int64_t i = 0; i < spec.head_size; ++i) {
          const int64_t at = (t * spec.num_heads + h) * spec.head_size + i;
          q.codes[at] = float_to_fp8_e4m3(load_as_float(query.data(), query.dtype(), at) / s);
          store_from_float(query.data(), query.dtype(), at, fp8_e4m3_to_float(q.codes[at]) * s);
        }
      }
    }
  }
  return q;
}

}  // namespace pagedattn::testing
