// In-process groups on a device (docs/dcp.md): N ranks of one process, driven by one thread each,
// whose buffers live on one device. The host group is pagedattn::make_in_process_group
// (communicator.h); on a CUDA device the same rendezvous agrees on every call and the data moves
// on the GPU, each rank's share on its own stream: the test double of a NCCL group on one GPU
// (NCCL refuses two ranks on one device).
#pragma once

#include <memory>
#include <vector>

#include "pagedattn/communicator.h"

namespace pagedattn::dcp {

// The host group for Device::cpu(), the device group for a CUDA device. Collectives of the device
// group are enqueued on the stream each call gives (null: the legacy default stream) and return
// once every rank has enqueued its share; a rank's later work on that stream waits until every
// rank has read its send buffer, so the buffer may be reused or freed in stream order. world_size
// in [1, kMaxDeviceGroupRanks] on a device (its reduce_scatter reads every rank's buffer in one
// kernel); Unimplemented in builds without CUDA.
inline constexpr int kMaxDeviceGroupRanks = 64;
StatusOr<std::vector<std::unique_ptr<Communicator>>> make_in_process_group(int world_size,
                                                                           const Device& device);

// The device group alone (CUDA builds; in_process_device_group_cuda.cc).
StatusOr<std::vector<std::unique_ptr<Communicator>>> make_in_process_device_group(int world_size,
                                                                                  int device);

}  // namespace pagedattn::dcp
