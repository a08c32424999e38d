// The argument checks every Communicator implementation shares, so that each refuses the same
// calls with the same messages.
#pragma once

#include <cstdint>

#include "pagedattn/communicator.h"

namespace pagedattn::dcp {

// What all ranks of one collective must agree on.
struct CollectiveSignature {
  CollectiveKind kind = CollectiveKind::kAllGather;
  DType dtype = DType::kF32;
  int64_t send_count = 0;
  int64_t recv_count = 0;
  friend bool operator==(const CollectiveSignature&, const CollectiveSignature&) = default;
};

// Checks send and recv of `kind` for a group of `world_size` ranks whose buffers live on `device`
// (see communicator.h for the rules); messages name the collective, the buffer and what is allowed.
StatusOr<CollectiveSignature> check_collective(CollectiveKind kind, const TensorView& send,
                                               const TensorView& recv, int world_size,
                                               const Device& device);

}  // namespace pagedattn::dcp
