// A GPU forward's query as each launch reads it. A 16-bit query as given. An fp8_e4m3 query
// (KVScales::q_scale, vLLM's FP8 attention) as given where the FP8 tensor cores run the launch (the
// v3 FP8 kernel takes it with its scale per request and KV head: no conversion pass), and
// dequantized to the layer's dtype (dequantize_fp8_query) for every other kernel: once per
// forward, on first need, into stream-ordered memory freed when the forward returns, after its
// launches. Include from *_cuda.cc files only.
#pragma once

#include <cstdint>

#include "kernels/attention/paged_attention.h"
#include "pagedattn/backend.h"

namespace pagedattn::gpu {

class ForwardQuery {
 public:
  // cu_seqlens_q: the step's [num_reqs + 1] query starts (device), for a q_scale per request.
  ForwardQuery(const TensorView& query, const TensorView& q_scale, DType layer_dtype,
               const int32_t* cu_seqlens_q, int num_reqs, StreamHandle stream)
      : query_(query),
        q_scale_(q_scale),
        layer_dtype_(layer_dtype),
        cu_seqlens_q_(cu_seqlens_q),
        num_reqs_(num_reqs),
        stream_(stream) {}
  ForwardQuery(const ForwardQuery&) = delete;
  ForwardQuery& operator=(const ForwardQuery&) = delete;
  ~ForwardQuery();

  bool e4m3() const { return query_.dtype() == DType::kFP8E4M3; }

  // The query in the layer's dtype (the given one where it has it).
  StatusOr<TensorView> dequantized();

  // p's query for its launch: the e4m3 query and its descale where p runs on the FP8 tensor cores
  // (generation v3, fp8_tensor_cores, no packing) and that kernel serves it, else the query in the
  // layer's dtype. Called before the generation is chosen (which then judges the launch as it will
  // run) and again after (a launch moved to v2 reads the dequantized query). first_request: the
  // step's request that is p's request 0 (a pass from a later request on: its q_scale rows).
  Status bind(kernels::PagedAttentionParams& p, int first_request = 0);

 private:
  TensorView query_;
  TensorView q_scale_;
  DType layer_dtype_;
  const int32_t* cu_seqlens_q_;
  int num_reqs_;
  StreamHandle stream_;
  void* buffer_ = nullptr;  // the dequantized query, once made
  TensorView dequantized_;
};

}  // namespace pagedattn::gpu
