// One collective round of an in-process group: arrive, agree, move, depart.
#include "dcp/rendezvous.h"

#include <utility>

namespace pagedattn::dcp {
namespace {

std::string describe(const CollectiveSignature& s) {
  return std::string(collective_kind_name(s.kind)) + "(" + std::string(dtype_name(s.dtype)) +
         ", send " + std::to_string(s.send_count) + ", recv " + std::to_string(s.recv_count) + ")";
}

}  // namespace

Rendezvous::Rendezvous(int world_size)
    : world_size_(world_size), sends_(world_size), calls_(world_size) {}

std::string Rendezvous::disagreement() const {
  for (int r = 0; r < world_size_; ++r) {
    if (!calls_[r].status.ok()) {
      return "rank " + std::to_string(r) + "'s call is invalid (" + calls_[r].status.message() + ")";
    }
  }
  for (int r = 1; r < world_size_; ++r) {
    if (!(calls_[r].signature == calls_[0].signature)) {
      return "ranks disagree: rank 0 called " + describe(calls_[0].signature) + ", rank " +
             std::to_string(r) + " called " + describe(calls_[r].signature);
    }
  }
  return {};
}

Status Rendezvous::run(int rank, const StatusOr<CollectiveSignature>& call, const void* send,
                       const Move& move) {
  std::unique_lock lock(mutex_);
  // A rank that is already at its next collective waits for the last round to drain.
  changed_.wait(lock, [&] { return phase_ == Phase::kArriving; });
  const uint64_t round = generation_;
  sends_[rank] = send;
  calls_[rank] = call.ok() ? Call{ok_status(), *call} : Call{call.status(), {}};
  if (++arrived_ == world_size_) {
    failure_ = disagreement();
    phase_ = Phase::kMoving;
    changed_.notify_all();
  } else {
    changed_.wait(lock, [&] { return phase_ == Phase::kMoving; });
  }
  Status result = ok_status();
  if (!call.ok()) {
    result = call.status();  // the rank at fault gets its own message
  } else if (!failure_.empty()) {
    result = invalid_argument("rank " + std::to_string(rank) + ": collective refused: " + failure_);
  }

  if (result.ok()) {
    // sends_ stays fixed until every rank departs, so it can be read without the lock.
    lock.unlock();
    move(sends_);
    lock.lock();
  }
  if (++departed_ == world_size_) {
    arrived_ = 0;
    departed_ = 0;
    failure_.clear();
    ++generation_;
    phase_ = Phase::kArriving;
    changed_.notify_all();
  } else {
    changed_.wait(lock, [&] { return generation_ != round; });
  }
  return result;
}

}  // namespace pagedattn::dcp
