// Communicator: the collectives decode context parallelism (DCP) needs, over one group of ranks.
//
// Buffers are TensorViews treated as flat, contiguous arrays of one dtype (f32, f16, bf16, i32 or
// i64; reduce_scatter takes the floating ones only). With n = send.numel():
//   all_gather      recv has world_size * n elements; recv chunk r = rank r's send.
//   reduce_scatter  send has world_size * n' elements, recv has n'; recv = sum over ranks of their
//                   send chunk [rank * n', (rank + 1) * n').
//   all_to_all      send and recv have world_size * c elements; recv chunk s = rank s's send chunk
//                   [rank * c, (rank + 1) * c).
// send and recv must not overlap. Every rank of the group must make the same sequence of calls with
// the same dtype and sizes. A call is asynchronous on `stream` where the implementation runs on a
// device (NCCL); host implementations finish before returning and take no stream.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "pagedattn/backend.h"
#include "pagedattn/status.h"
#include "pagedattn/tensor.h"
#include "pagedattn/types.h"

namespace pagedattn {

enum class CollectiveKind { kAllGather, kReduceScatter, kAllToAll };
std::string_view collective_kind_name(CollectiveKind kind);  // "all_gather", ...

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Where the buffers of every collective must live.
  virtual Device device() const = 0;

  virtual Status all_gather(const TensorView& send, const TensorView& recv,
                            StreamHandle stream = nullptr) = 0;
  virtual Status reduce_scatter(const TensorView& send, const TensorView& recv,
                                StreamHandle stream = nullptr) = 0;
  virtual Status all_to_all(const TensorView& send, const TensorView& recv,
                            StreamHandle stream = nullptr) = 0;
};

// N ranks inside this process, for tests and CPU runs: element r of the result is rank r, and each
// is driven by its own thread. Host buffers, no stream. Each collective is a rendezvous of all N
// ranks: ranks whose calls disagree (another collective, dtype or size) or that pass bad arguments
// all get an error instead of a hang; a rank that never calls leaves the others waiting, as with
// NCCL. reduce_scatter sums in float32 in rank order and rounds once, so results are
// deterministic. world_size must be in [1, 1024]. (Ranks on one CUDA device, for tests of the GPU
// backends: dcp::make_in_process_group in src/dcp/in_process_group.h.)
StatusOr<std::vector<std::unique_ptr<Communicator>>> make_in_process_group(int world_size);

}  // namespace pagedattn
