#include "testing/counted_communicator.h"

namespace pagedattn::testing {

void CountedCommunicator::count(const TensorView& chunked, const Status& done) {
  if (!done.ok()) return;
  const double bytes = static_cast<double>(chunked.numel()) * dtype_size(chunked.dtype());
  received_ += bytes * (world_size() - 1) / world_size();
}

Status CountedCommunicator::all_gather(const TensorView& send, const TensorView& recv,
                                       StreamHandle stream) {
  const Status done = inner_.all_gather(send, recv, stream);
  count(recv, done);
  return done;
}

Status CountedCommunicator::reduce_scatter(const TensorView& send, const TensorView& recv,
                                           StreamHandle stream) {
  const Status done = inner_.reduce_scatter(send, recv, stream);
  count(send, done);
  return done;
}

Status CountedCommunicator::all_to_all(const TensorView& send, const TensorView& recv,
                                       StreamHandle stream) {
  const Status done = inner_.all_to_all(send, recv, stream);
  count(recv, done);
  return done;
}

double CountedCommunicator::take_received_bytes() {
  const double bytes = received_;
  received_ = 0.0;
  return bytes;
}

}  // namespace pagedattn::testing
