// A HostBatch copied to a CUDA device, and results copied back (CUDA builds; without CUDA every
// function returns Unimplemented).
#pragma once

#include <memory>

#include "pagedattn/backend.h"
#include "pagedattn/metadata.h"
#include "testing/host_batch.h"

namespace pagedattn::testing {

// Owns device copies of every tensor of a HostBatch plus poisoned (NaN) output buffers.
class DeviceBatch {
 public:
  virtual ~DeviceBatch() = default;
  virtual const TensorView& query() const = 0;
  virtual const TensorView& key() const = 0;
  virtual const TensorView& value() const = 0;
  virtual const TensorView& kv_cache() const = 0;
  virtual KVScales scales() const = 0;
  virtual CommonAttentionMetadata metadata() const = 0;  // host copies + device tensors
  virtual const TensorView& output() const = 0;          // [T, Hq, D] dtype, NaN before forward
  virtual const TensorView& output_lse() const = 0;      // [Hq, T] f32, NaN before forward
  // Copies output, LSE and the cache back into host tensors shaped like the batch's.
  virtual Status download(HostTensor& output, HostTensor& lse, KVCacheAllocation& kv_cache) const = 0;
};

StatusOr<std::unique_ptr<DeviceBatch>> upload_batch(const HostBatch& batch, int device_index);

}  // namespace pagedattn::testing
