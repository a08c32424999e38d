// make_in_process_group: N ranks in one process, host buffers, one Rendezvous per group; and the
// choice between it and the device group (dcp/in_process_group.h).
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "common/numeric.h"
#include "dcp/collective_checks.h"
#include "dcp/in_process_group.h"
#include "dcp/rendezvous.h"
#include "pagedattn/communicator.h"
#include "pagedattn/config.h"

namespace pagedattn {
namespace {

constexpr int kMaxInProcessRanks = 1024;

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<dcp::Rendezvous> rendezvous, int rank, int world_size)
      : rendezvous_(std::move(rendezvous)), rank_(rank), world_size_(world_size) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  Device device() const override { return Device::cpu(); }

  Status all_gather(const TensorView& send, const TensorView& recv,
                    StreamHandle stream) override {
    const auto call = checked(CollectiveKind::kAllGather, send, recv, stream);
    const size_t bytes = static_cast<size_t>(send.nbytes());
    return rendezvous_->run(rank_, call, send.data(), [&](std::span<const void* const> sends) {
      for (int s = 0; s < world_size_; ++s) {
        if (bytes > 0) std::memcpy(recv.data_as<char>() + s * bytes, sends[s], bytes);
      }
    });
  }

  Status reduce_scatter(const TensorView& send, const TensorView& recv,
                        StreamHandle stream) override {
    const auto call = checked(CollectiveKind::kReduceScatter, send, recv, stream);
    const int64_t count = recv.numel();
    return rendezvous_->run(rank_, call, send.data(), [&](std::span<const void* const> sends) {
      const DType dtype = recv.dtype();
      for (int64_t i = 0; i < count; ++i) {
        float sum = 0.0f;  // float32 in rank order, rounded once: the same bits on every run
        for (int s = 0; s < world_size_; ++s) {
          sum += load_as_float(sends[s], dtype, rank_ * count + i);
        }
        store_from_float(recv.data(), dtype, i, sum);
      }
    });
  }

  Status all_to_all(const TensorView& send, const TensorView& recv,
                    StreamHandle stream) override {
    const auto call = checked(CollectiveKind::kAllToAll, send, recv, stream);
    const size_t chunk = static_cast<size_t>(send.nbytes()) / static_cast<size_t>(world_size_);
    return rendezvous_->run(rank_, call, send.data(), [&](std::span<const void* const> sends) {
      for (int s = 0; s < world_size_; ++s) {
        if (chunk > 0) {
          std::memcpy(recv.data_as<char>() + s * chunk,
                      static_cast<const char*>(sends[s]) + rank_ * chunk, chunk);
        }
      }
    });
  }

 private:
  StatusOr<dcp::CollectiveSignature> checked(CollectiveKind kind, const TensorView& send,
                                             const TensorView& recv, StreamHandle stream) const {
    if (stream != nullptr) {
      return invalid_argument(std::string(collective_kind_name(kind)) +
                              ": stream must be null for the in-process group (host buffers; the "
                              "call finishes before it returns)");
    }
    return dcp::check_collective(kind, send, recv, world_size_, device());
  }

  std::shared_ptr<dcp::Rendezvous> rendezvous_;
  int rank_;
  int world_size_;
};

}  // namespace

StatusOr<std::vector<std::unique_ptr<Communicator>>> make_in_process_group(int world_size) {
  if (world_size < 1 || world_size > kMaxInProcessRanks) {
    return invalid_argument("make_in_process_group: world_size = " + std::to_string(world_size) +
                            " must be in [1, " + std::to_string(kMaxInProcessRanks) + "]");
  }
  auto rendezvous = std::make_shared<dcp::Rendezvous>(world_size);
  std::vector<std::unique_ptr<Communicator>> ranks;
  ranks.reserve(world_size);
  for (int r = 0; r < world_size; ++r) {
    ranks.push_back(std::make_unique<InProcessCommunicator>(rendezvous, r, world_size));
  }
  return ranks;
}

}  // namespace pagedattn

namespace pagedattn::dcp {

StatusOr<std::vector<std::unique_ptr<Communicator>>> make_in_process_group(int world_size,
                                                                           const Device& device) {
  if (device.is_cpu()) return pagedattn::make_in_process_group(world_size);
#if PAGEDATTN_WITH_CUDA
  return make_in_process_device_group(world_size, device.index);
#else
  return unimplemented("make_in_process_group on " + device_name(device) +
                       ": this build has no CUDA support (allowed: cpu)");
#endif
}

}  // namespace pagedattn::dcp
