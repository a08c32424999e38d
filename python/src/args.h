// Python values for the library's enums and small structs: names as strings ("bf16", "bfloat16",
// torch.bfloat16 and numpy.float16 alike), devices as "cpu" / "cuda:1" / torch.device, windows as
// (left, right) or None. Each parser raises ValueError naming the argument.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string>

#include "pagedattn/backend.h"
#include "pagedattn/types.h"

namespace pagedattn::python {

namespace py = pybind11;

DType dtype_arg(py::handle value, const char* name);
KVCacheDType kv_cache_dtype_arg(py::handle value, const char* name);
KVCacheLayout layout_arg(py::handle value, const char* name);
AttentionType attn_type_arg(py::handle value, const char* name);
// None = the best device present (CUDA device 0, else the CPU).
Device device_arg(py::handle value, const char* name);
SlidingWindow window_arg(py::handle value, const char* name);
std::optional<ComputeCapability> compute_capability_arg(py::handle value, const char* name);

std::string to_string(const SlidingWindow& window);

}  // namespace pagedattn::python
