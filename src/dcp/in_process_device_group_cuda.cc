// make_in_process_device_group (in_process_group.h): N ranks on one CUDA device, each driving its
// own stream, over the host group's Rendezvous. Each rank's share moves on its stream, one kernel
// per collective: launch_rank_gather for all_gather and all_to_all, launch_rank_sum for
// reduce_scatter.
//
// Synchronisation. Every rank records its `ready` event on its stream as it arrives (after the
// work that wrote its send buffer); in the round, each rank's stream waits for every rank's
// `ready` before reading, then records its own `read` event. Once the round is over, every rank's
// stream waits for all `read` events, so nothing a rank enqueues after the call (reusing or
// freeing its send buffer) runs before every other rank has read that buffer. Each event is
// recorded before any rank waits for it (the rendezvous orders them on the host), so the streams'
// waits point back in host order and cannot form a cycle; and a rank records an event again only
// in a later round, which no rank enters before every wait on its previous record is enqueued.
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dcp/collective_checks.h"
#include "dcp/in_process_group.h"
#include "dcp/in_process_kernels.h"
#include "dcp/rendezvous.h"
#include "runtime/check.h"

namespace pagedattn::dcp {
namespace {

// The `ready` and `read` event of every rank, shared by the group's communicators.
class GroupEvents {
 public:
  static StatusOr<std::shared_ptr<GroupEvents>> create(int world_size, int device) {
    runtime::ScopedDevice guard(device);
    PAGEDATTN_RETURN_IF_ERROR(guard.status());
    auto events = std::shared_ptr<GroupEvents>(new GroupEvents(device));
    for (std::vector<cudaEvent_t>* kind : {&events->ready_, &events->read_}) {
      for (int r = 0; r < world_size; ++r) {
        cudaEvent_t event = nullptr;
        PAGEDATTN_CUDA_RETURN_IF_ERROR(
            cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
            "creating the in-process group's events on cuda:" + std::to_string(device));
        kind->push_back(event);
      }
    }
    return events;
  }
  GroupEvents(const GroupEvents&) = delete;
  GroupEvents& operator=(const GroupEvents&) = delete;
  ~GroupEvents() {
    runtime::ScopedDevice guard(device_);
    for (cudaEvent_t event : ready_) cudaEventDestroy(event);
    for (cudaEvent_t event : read_) cudaEventDestroy(event);
  }

  cudaEvent_t ready(int rank) const { return ready_[rank]; }
  cudaEvent_t read(int rank) const { return read_[rank]; }
  int world_size() const { return static_cast<int>(ready_.size()); }

 private:
  explicit GroupEvents(int device) : device_(device) {}
  int device_;
  std::vector<cudaEvent_t> ready_, read_;
};

class InProcessDeviceCommunicator final : public Communicator {
 public:
  InProcessDeviceCommunicator(std::shared_ptr<Rendezvous> rendezvous,
                              std::shared_ptr<GroupEvents> events, int rank, int device)
      : rendezvous_(std::move(rendezvous)),
        events_(std::move(events)),
        rank_(rank),
        world_size_(events_->world_size()),
        device_(device) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  Device device() const override { return Device::cuda(device_); }

  Status all_gather(const TensorView& send, const TensorView& recv, StreamHandle stream) override {
    const int64_t bytes = send.nbytes();
    return round(CollectiveKind::kAllGather, send, recv, stream,
                 [&](std::span<const void* const> sends, cudaStream_t s) {
                   return launch_rank_gather(sends, 0, recv.data(), bytes, s);
                 });
  }

  Status reduce_scatter(const TensorView& send, const TensorView& recv,
                        StreamHandle stream) override {
    const int64_t count = recv.numel();
    return round(CollectiveKind::kReduceScatter, send, recv, stream,
                 [&](std::span<const void* const> sends, cudaStream_t s) {
                   return launch_rank_sum(sends, rank_ * count, recv.data(), count, recv.dtype(),
                                          s);
                 });
  }

  Status all_to_all(const TensorView& send, const TensorView& recv, StreamHandle stream) override {
    const int64_t chunk = send.nbytes() / world_size_;
    return round(CollectiveKind::kAllToAll, send, recv, stream,
                 [&](std::span<const void* const> sends, cudaStream_t s) {
                   return launch_rank_gather(sends, rank_ * chunk, recv.data(), chunk, s);
                 });
  }

 private:
  // One collective: checks, the `ready` record, the rendezvous with `move` (this rank's share,
  // enqueued on its stream after every rank's `ready`), then the waits for every rank's `read`.
  // A failure before the rendezvous still joins it, as a refused call, so no rank is left waiting.
  template <typename Move>
  Status round(CollectiveKind kind, const TensorView& send, const TensorView& recv,
               StreamHandle stream, Move&& move) {
    const auto s = static_cast<cudaStream_t>(stream);
    runtime::ScopedDevice guard(device_);
    StatusOr<CollectiveSignature> call = check_collective(kind, send, recv, world_size_, device());
    if (call.ok() && !guard.status().ok()) call = guard.status();
    if (call.ok()) {
      if (Status recorded = runtime::cuda_status(cudaEventRecord(events_->ready(rank_), s),
                                                 "recording the send buffer's readiness");
          !recorded.ok()) {
        call = recorded;
      }
    }
    Status moved = ok_status();
    PAGEDATTN_RETURN_IF_ERROR(rendezvous_->run(
        rank_, call, send.data(),
        [&](std::span<const void* const> sends) { moved = enqueue_share(sends, s, move); }));
    PAGEDATTN_RETURN_IF_ERROR(moved);
    for (int r = 0; r < world_size_; ++r) {
      PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(s, events_->read(r), 0),
                                     "waiting for rank " + std::to_string(r) + "'s reads");
    }
    return ok_status();
  }

  template <typename Move>
  Status enqueue_share(std::span<const void* const> sends, cudaStream_t s, Move& move) {
    for (int r = 0; r < world_size_; ++r) {
      PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(s, events_->ready(r), 0),
                                     "waiting for rank " + std::to_string(r) + "'s send buffer");
    }
    const Status moved = move(sends, s);
    // Recorded even after a failed move: the others wait for it either way.
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_->read(rank_), s),
                                   "recording this rank's reads");
    return moved;
  }

  std::shared_ptr<Rendezvous> rendezvous_;
  std::shared_ptr<GroupEvents> events_;
  int rank_;
  int world_size_;
  int device_;
};

}  // namespace

StatusOr<std::vector<std::unique_ptr<Communicator>>> make_in_process_device_group(int world_size,
                                                                                  int device) {
  if (world_size < 1 || world_size > kMaxDeviceGroupRanks) {
    return invalid_argument("make_in_process_group on cuda:" + std::to_string(device) +
                            ": world_size = " + std::to_string(world_size) + " must be in [1, " +
                            std::to_string(kMaxDeviceGroupRanks) + "]");
  }
  int device_count = 0;
  PAGEDATTN_RETURN_IF_ERROR(
      runtime::cuda_status(cudaGetDeviceCount(&device_count), "cudaGetDeviceCount"));
  if (device < 0 || device >= device_count) {
    return invalid_argument("make_in_process_group: device = cuda:" + std::to_string(device) +
                            " (allowed: cuda:0 to cuda:" + std::to_string(device_count - 1) + ")");
  }
  PAGEDATTN_ASSIGN_OR_RETURN(std::shared_ptr<GroupEvents> events,
                             GroupEvents::create(world_size, device));
  auto rendezvous = std::make_shared<Rendezvous>(world_size);
  std::vector<std::unique_ptr<Communicator>> ranks;
  ranks.reserve(world_size);
  for (int r = 0; r < world_size; ++r) {
    ranks.push_back(std::make_unique<InProcessDeviceCommunicator>(rendezvous, events, r, device));
  }
  return ranks;
}

}  // namespace pagedattn::dcp
