// The NCCL Communicator's entry points in builds without CUDA: each says why it cannot serve.
#include "pagedattn/config.h"
#include "pagedattn/nccl_communicator.h"

#if !PAGEDATTN_WITH_CUDA
namespace pagedattn {
namespace {

Status no_nccl(std::string_view what) {
  return unimplemented(std::string(what) + ": this build has no CUDA support, so no NCCL");
}

}  // namespace

StatusOr<NcclUniqueId> make_nccl_unique_id() { return no_nccl("make_nccl_unique_id"); }

StatusOr<std::unique_ptr<Communicator>> wrap_nccl_communicator(ncclComm_t) {
  return no_nccl("wrap_nccl_communicator");
}

StatusOr<std::unique_ptr<Communicator>> make_nccl_communicator(const NcclUniqueId&, int, int,
                                                               int) {
  return no_nccl("make_nccl_communicator");
}

}  // namespace pagedattn
#endif
