// The meeting point of an in-process group's ranks: one round per collective.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "dcp/collective_checks.h"

namespace pagedattn::dcp {

class Rendezvous {
 public:
  // Moves this rank's share of the data, given every rank's send buffer (indexed by rank).
  using Move = std::function<void(std::span<const void* const> sends)>;

  explicit Rendezvous(int world_size);

  // Runs one round: waits for all ranks, checks that every rank's call is valid and that all
  // agree with rank 0's, runs `move` on every rank when they do, and returns once every rank is
  // done reading the others' send buffers (so a rank may reuse its send buffer right after).
  // `call` is this rank's checked call; an invalid one fails the round for every rank.
  Status run(int rank, const StatusOr<CollectiveSignature>& call, const void* send,
             const Move& move);

 private:
  enum class Phase { kArriving, kMoving };
  struct Call {
    Status status;
    CollectiveSignature signature;
  };
  // Empty when every call is valid and matches rank 0's; else why the round fails.
  std::string disagreement() const;

  const int world_size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  Phase phase_ = Phase::kArriving;
  uint64_t generation_ = 0;  // rounds completed: a waiting rank knows when its own round ended
  int arrived_ = 0;
  int departed_ = 0;
  std::string failure_;
  std::vector<const void*> sends_;
  std::vector<Call> calls_;
};

}  // namespace pagedattn::dcp
