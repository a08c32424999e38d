// A stream held shut while the host enqueues work behind it, then opened: what follows runs back to
// back at the GPU's pace, not the host's (nvbench's blocking kernel). For timing work whose host
// side is slower than its GPU side, such as the in-process group's collectives (a thread meeting
// each).
#pragma once

#include <cuda_runtime.h>

#include "pagedattn/status.h"

namespace pagedattn::test {

class StreamGate {
 public:
  StreamGate();
  ~StreamGate();
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  // Enqueues the kernel that holds `stream` until open() (or a second, so that a host blocked on a
  // full launch queue cannot hang the run).
  Status close(cudaStream_t stream);
  void open();
  // After the stream's work: whether the gate opened by its timeout (the timing is host-paced).
  bool timed_out() const;

 private:
  // Host-mapped: [0] the host's "open", [1] the kernel's "timed out".
  volatile int* flags_ = nullptr;
};

}  // namespace pagedattn::test
