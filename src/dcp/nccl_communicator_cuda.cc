// The NCCL Communicator (CUDA builds): collectives enqueued on the caller's stream, checked first
// with the same rules as every Communicator.
#include <cstring>
#include <string>

#include "dcp/collective_checks.h"
#include "dcp/nccl_api.h"
#include "pagedattn/nccl_communicator.h"
#include "runtime/check.h"

namespace pagedattn {
namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId::bytes),
              "NcclUniqueId must hold nccl.h's ncclUniqueId exactly");

using dcp::NcclApi;

Status nccl_status(const NcclApi& nccl, ncclResult_t result, std::string_view what) {
  if (result == ncclSuccess) return ok_status();
  // NCCL failures are device-side failures, reported like the CUDA runtime's.
  return Status(StatusCode::kCudaError, std::string(what) + ": " + nccl.get_error_string(result) +
                                            " (" + nccl.get_last_error(nullptr) + ")");
}

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF16: return ncclFloat16;
    case DType::kBF16: return ncclBfloat16;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
    default: return ncclFloat32;  // check_collective admits no other dtype
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const NcclApi& nccl, ncclComm_t comm, bool owned, int rank, int world_size,
                   int device)
      : nccl_(nccl),
        comm_(comm),
        owned_(owned),
        rank_(rank),
        world_size_(world_size),
        device_(device) {}
  ~NcclCommunicator() override {
    if (owned_) nccl_.comm_destroy(comm_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  Device device() const override { return Device::cuda(device_); }

  Status all_gather(const TensorView& send, const TensorView& recv, StreamHandle stream) override {
    PAGEDATTN_ASSIGN_OR_RETURN(
        const auto call,
        dcp::check_collective(CollectiveKind::kAllGather, send, recv, world_size_, device()));
    return nccl_status(nccl_,
                       nccl_.all_gather(send.data(), recv.data(), call.send_count,
                                        nccl_dtype(call.dtype), comm_, cuda_stream(stream)),
                       "ncclAllGather");
  }

  Status reduce_scatter(const TensorView& send, const TensorView& recv,
                        StreamHandle stream) override {
    PAGEDATTN_ASSIGN_OR_RETURN(
        const auto call,
        dcp::check_collective(CollectiveKind::kReduceScatter, send, recv, world_size_, device()));
    return nccl_status(
        nccl_,
        nccl_.reduce_scatter(send.data(), recv.data(), call.recv_count, nccl_dtype(call.dtype),
                             ncclSum, comm_, cuda_stream(stream)),
        "ncclReduceScatter");
  }

  Status all_to_all(const TensorView& send, const TensorView& recv, StreamHandle stream) override {
    PAGEDATTN_ASSIGN_OR_RETURN(
        const auto call,
        dcp::check_collective(CollectiveKind::kAllToAll, send, recv, world_size_, device()));
    return nccl_status(nccl_,
                       nccl_.all_to_all(send.data(), recv.data(), call.send_count / world_size_,
                                        nccl_dtype(call.dtype), comm_, cuda_stream(stream)),
                       "ncclAlltoAll");
  }

 private:
  static cudaStream_t cuda_stream(StreamHandle stream) { return static_cast<cudaStream_t>(stream); }

  const NcclApi& nccl_;
  ncclComm_t comm_;
  bool owned_;
  int rank_;
  int world_size_;
  int device_;
};

}  // namespace

StatusOr<NcclUniqueId> make_nccl_unique_id() {
  PAGEDATTN_ASSIGN_OR_RETURN(const NcclApi* nccl, dcp::nccl_api());
  ncclUniqueId id;
  PAGEDATTN_RETURN_IF_ERROR(nccl_status(*nccl, nccl->get_unique_id(&id), "ncclGetUniqueId"));
  NcclUniqueId result;
  std::memcpy(result.bytes.data(), &id, sizeof(id));
  return result;
}

StatusOr<std::unique_ptr<Communicator>> wrap_nccl_communicator(ncclComm_t comm) {
  if (comm == nullptr) return invalid_argument("wrap_nccl_communicator: comm is null");
  PAGEDATTN_ASSIGN_OR_RETURN(const NcclApi* nccl, dcp::nccl_api());
  int rank = 0;
  int world_size = 0;
  int device = 0;
  PAGEDATTN_RETURN_IF_ERROR(
      nccl_status(*nccl, nccl->comm_user_rank(comm, &rank), "ncclCommUserRank"));
  PAGEDATTN_RETURN_IF_ERROR(
      nccl_status(*nccl, nccl->comm_count(comm, &world_size), "ncclCommCount"));
  PAGEDATTN_RETURN_IF_ERROR(
      nccl_status(*nccl, nccl->comm_cu_device(comm, &device), "ncclCommCuDevice"));
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(*nccl, comm, /*owned=*/false, rank, world_size, device));
}

StatusOr<std::unique_ptr<Communicator>> make_nccl_communicator(const NcclUniqueId& id,
                                                               int world_size, int rank,
                                                               int device) {
  if (world_size < 1) {
    return invalid_argument("make_nccl_communicator: world_size = " + std::to_string(world_size) +
                            " must be at least 1");
  }
  if (rank < 0 || rank >= world_size) {
    return invalid_argument("make_nccl_communicator: rank = " + std::to_string(rank) +
                            " must be in [0, world_size = " + std::to_string(world_size) + ")");
  }
  int device_count = 0;
  PAGEDATTN_RETURN_IF_ERROR(
      runtime::cuda_status(cudaGetDeviceCount(&device_count), "cudaGetDeviceCount"));
  if (device < 0 || device >= device_count) {
    return invalid_argument("make_nccl_communicator: device = " + std::to_string(device) +
                            " must be in [0, " + std::to_string(device_count) + ")");
  }
  PAGEDATTN_ASSIGN_OR_RETURN(const NcclApi* nccl, dcp::nccl_api());
  runtime::ScopedDevice scope(device);
  PAGEDATTN_RETURN_IF_ERROR(scope.status());
  ncclUniqueId nccl_id;
  std::memcpy(&nccl_id, id.bytes.data(), sizeof(nccl_id));
  ncclComm_t comm = nullptr;
  PAGEDATTN_RETURN_IF_ERROR(nccl_status(
      *nccl, nccl->comm_init_rank(&comm, world_size, nccl_id, rank), "ncclCommInitRank"));
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(*nccl, comm, /*owned=*/true, rank, world_size, device));
}

}  // namespace pagedattn
