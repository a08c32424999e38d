// A Communicator that forwards every collective to another and counts the bytes its rank receives
// from the other ranks, the traffic one rank of a DCP group causes per step.
#pragma once

#include "pagedattn/communicator.h"

namespace pagedattn::testing {

class CountedCommunicator : public Communicator {
 public:
  explicit CountedCommunicator(Communicator& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  Device device() const override { return inner_.device(); }

  // all_gather: every chunk of recv but the rank's own; reduce_scatter: the other ranks' chunks of
  // send that are summed into recv; all_to_all: every chunk of recv but the one the rank sent
  // itself.
  Status all_gather(const TensorView& send, const TensorView& recv,
                    StreamHandle stream = nullptr) override;
  Status reduce_scatter(const TensorView& send, const TensorView& recv,
                        StreamHandle stream = nullptr) override;
  Status all_to_all(const TensorView& send, const TensorView& recv,
                    StreamHandle stream = nullptr) override;

  // Bytes received since the last call, and the count reset.
  double take_received_bytes();

 private:
  void count(const TensorView& chunked, const Status& done);

  Communicator& inner_;
  double received_ = 0.0;
};

}  // namespace pagedattn::testing
