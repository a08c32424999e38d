// CommonAttentionMetadata as Python holds it: the caller's arrays (any DLPack producer) and the
// step's sizes. It becomes the C++ struct, as views, for the length of one call.
#pragma once

#include <pybind11/pybind11.h>

#include "pagedattn/metadata.h"
#include "tensor_arg.h"

namespace pagedattn::python {

namespace py = pybind11;

struct PyCommonMetadata {
  py::object query_start_loc;      // [num_reqs + 1] int32, device (cu_seqlens_q)
  py::object query_start_loc_cpu;  // [num_reqs + 1] int32, host; None = query_start_loc (host)
  py::object seq_lens;             // [num_reqs] int32, device
  py::object seq_lens_cpu;         // [num_reqs] int32, host; None = seq_lens (host)
  int num_reqs = 0;
  int num_actual_tokens = 0;
  int max_query_len = 0;
  int max_seq_len = 0;
  py::object block_table_tensor;   // [num_reqs, max_blocks] int32, device
  py::object slot_mapping;         // [num_tokens] int64, device
  bool causal = true;
  py::object is_prefilling;        // optional [num_reqs] uint8, host

  // Views borrowed into `borrowed`, valid while it lives.
  CommonAttentionMetadata view(Borrowed& borrowed) const;
  // The arrays, for whoever must keep them alive past the call.
  py::tuple arrays() const;
};

}  // namespace pagedattn::python
