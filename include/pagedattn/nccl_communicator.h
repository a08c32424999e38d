// The NCCL Communicator: one rank of a group on one CUDA device, collectives enqueued on a stream.
// Available in CUDA builds; elsewhere every function returns Unimplemented.
#pragma once

#include <array>
#include <memory>

#include "pagedattn/communicator.h"
#include "pagedattn/status.h"

// nccl.h's handle type, declared here so that this header does not need nccl.h.
typedef struct ncclComm* ncclComm_t;

namespace pagedattn {

// The bytes of an ncclUniqueId: rank 0 makes one and the engine sends it to every rank.
struct NcclUniqueId {
  std::array<char, 128> bytes{};
};
StatusOr<NcclUniqueId> make_nccl_unique_id();

// Wraps a communicator the engine owns (and destroys, after this object): the rank, size and
// device are NCCL's.
StatusOr<std::unique_ptr<Communicator>> wrap_nccl_communicator(ncclComm_t comm);

// Joins the group `id` names as `rank` of `world_size` on CUDA device `device`; blocks until every
// rank has joined. The result owns the NCCL communicator and destroys it.
StatusOr<std::unique_ptr<Communicator>> make_nccl_communicator(const NcclUniqueId& id,
                                                               int world_size, int rank,
                                                               int device);

}  // namespace pagedattn
