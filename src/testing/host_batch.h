// A random paged batch on the host, built from a CaseSpec the way cases.md asks: N(0,1) inputs
// rounded to the dtype, the context already in the cache, shuffled physical block ids, blocks shared
// across requests for the common prefix, and every unused cache byte NaN (where the dtype has one).
#pragma once

#include <cstddef>
#include <vector>

#include "pagedattn/attention_layer.h"
#include "pagedattn/backend.h"
#include "pagedattn/kv_cache.h"
#include "pagedattn/metadata.h"
#include "testing/case_spec.h"

namespace pagedattn::testing {

// Owning host buffer with a contiguous view.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::vector<int64_t> shape);
  // Move-only: the view points into the owned bytes, so a copy would alias the original.
  HostTensor(const HostTensor&) = delete;
  HostTensor& operator=(const HostTensor&) = delete;
  HostTensor(HostTensor&&) = default;
  HostTensor& operator=(HostTensor&&) = default;
  const TensorView& view() const { return view_; }
  template <typename T>
  T* data() { return reinterpret_cast<T*>(bytes_.data()); }
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(bytes_.data()); }

 private:
  std::vector<std::byte> bytes_;
  TensorView view_;
};

struct HostBatch {
  CaseSpec spec;
  KVCacheLayout layout = KVCacheLayout::kNHD;
  AttentionImplParams params;     // scale, window, soft cap, ALiBi slopes, sinks, dtypes, layout
  HostTensor query;               // [T, Hq, D] dtype
  HostTensor key;                 // [T, Hkv, D] dtype: the new tokens
  HostTensor value;               // [T, Hkv, D] dtype
  KVCacheAllocation kv_cache;     // host; context tokens written, the new ones not yet
  HostTensor k_scale, v_scale;    // [1] or [Hkv] f32 (FP8 caches; 1.0 otherwise)
  HostTensor block_table;         // [B, max_blocks] int32
  HostTensor seq_lens;            // [B] int32
  HostTensor query_start_loc;     // [B + 1] int32
  HostTensor slot_mapping;        // [T] int64
  int64_t num_blocks = 0;

  KVScales scales() const { return {k_scale.view(), v_scale.view()}; }
  // Host metadata (device fields point at the host copies).
  CommonAttentionMetadata metadata() const;
};

// `layout` is the layout the backend will read (the case's kv_layout when given).
StatusOr<HostBatch> make_host_batch(const CaseSpec& spec, KVCacheLayout layout);

// The case's attention layer (ALiBi slopes and sink logits drawn as make_host_batch draws them).
AttentionLayer attention_layer_for(const CaseSpec& spec, KVCacheLayout layout, const Device& device);

}  // namespace pagedattn::testing
