#include "dcp/nccl_api.h"

#include <dlfcn.h>

#include <string>

namespace pagedattn::dcp {
namespace {

template <typename Function>
bool resolve(void* library, const char* name, Function& out) {
  out = reinterpret_cast<Function>(dlsym(library, name));
  return out != nullptr;
}

StatusOr<NcclApi> load() {
  void* library = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) library = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return unimplemented(std::string("the NCCL communicator needs libnccl.so.2 (") + dlerror() +
                         "); put NCCL's lib folder on the loader path");
  }
  NcclApi api;
  const char* missing = nullptr;
  for (const auto& [name, found] :
       {std::pair{"ncclGetUniqueId", resolve(library, "ncclGetUniqueId", api.get_unique_id)},
        std::pair{"ncclCommInitRank", resolve(library, "ncclCommInitRank", api.comm_init_rank)},
        std::pair{"ncclCommDestroy", resolve(library, "ncclCommDestroy", api.comm_destroy)},
        std::pair{"ncclCommCount", resolve(library, "ncclCommCount", api.comm_count)},
        std::pair{"ncclCommUserRank", resolve(library, "ncclCommUserRank", api.comm_user_rank)},
        std::pair{"ncclCommCuDevice", resolve(library, "ncclCommCuDevice", api.comm_cu_device)},
        std::pair{"ncclAllGather", resolve(library, "ncclAllGather", api.all_gather)},
        std::pair{"ncclReduceScatter", resolve(library, "ncclReduceScatter", api.reduce_scatter)},
        std::pair{"ncclAlltoAll", resolve(library, "ncclAlltoAll", api.all_to_all)},
        std::pair{"ncclGetErrorString",
                  resolve(library, "ncclGetErrorString", api.get_error_string)},
        std::pair{"ncclGetLastError", resolve(library, "ncclGetLastError", api.get_last_error)}}) {
    if (!found && missing == nullptr) missing = name;
  }
  if (missing != nullptr) {
    return unimplemented(std::string("the NCCL library found has no ") + missing +
                         " (the NCCL communicator needs NCCL 2.28 or later)");
  }
  return api;  // the library stays loaded for the process's life
}

}  // namespace

StatusOr<const NcclApi*> nccl_api() {
  static const StatusOr<NcclApi> api = load();
  if (!api.ok()) return api.status();
  return &*api;
}

}  // namespace pagedattn::dcp
