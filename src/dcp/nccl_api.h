// NCCL's entry points, loaded from libnccl.so.2 on first use rather than linked: a machine without
// NCCL still loads libpagedattn, and only the NCCL communicator is then unavailable. CUDA builds.
#pragma once

#include <nccl.h>

#include "pagedattn/status.h"

namespace pagedattn::dcp {

struct NcclApi {
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommCount) comm_count = nullptr;
  decltype(&ncclCommUserRank) comm_user_rank = nullptr;
  decltype(&ncclCommCuDevice) comm_cu_device = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclAlltoAll) all_to_all = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclGetLastError) get_last_error = nullptr;
};

// Loaded once per process; Unimplemented naming the library when it or a symbol is missing.
StatusOr<const NcclApi*> nccl_api();

}  // namespace pagedattn::dcp
