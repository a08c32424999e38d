// Build information, devices and the KV-cache geometry.
#include <pybind11/stl.h>

#include "args.h"
#include "bindings.h"
#include "errors.h"
#include "pagedattn/config.h"
#include "pagedattn/device_info.h"
#include "pagedattn/kv_cache.h"

namespace pagedattn::python {

namespace py = pybind11;
using namespace pybind11::literals;

void bind_core(py::module_& m) {
  m.attr("__version__") = PAGEDATTN_VERSION;
  m.attr("cuda_archs") = PAGEDATTN_CUDA_ARCHS;
  m.attr("head_sizes") = PAGEDATTN_HEAD_SIZES;
  m.def("built_with_cuda", &built_with_cuda, "Whether this build has the CUDA backends.");
  m.def("cuda_devices", [] {
    py::list out;
    for (const CudaDeviceInfo& d : cuda_devices()) {
      out.append(py::dict("index"_a = d.index, "name"_a = d.name,
                          "compute_capability"_a = compute_capability_name(d.capability),
                          "total_memory_bytes"_a = d.total_memory_bytes, "num_sms"_a = d.num_sms));
    }
    return out;
  }, "The CUDA devices present (empty without CUDA).");
  m.def("default_device", [] { return device_name(default_device()); },
        "The best device present: 'cuda:0' if any, else 'cpu'.");

  m.def("get_kv_cache_shape",
        [](int64_t num_blocks, int block_size, int num_kv_heads, int head_size, py::handle cache_dtype) {
          return unwrap(get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size,
                                           kv_cache_dtype_arg(cache_dtype, "cache_dtype")));
        },
        "num_blocks"_a, "block_size"_a, "num_kv_heads"_a, "head_size"_a, "cache_dtype"_a = "auto",
        "(num_blocks, 2, block_size, num_kv_heads, head_size).");
  m.def("get_kv_cache_stride_order",
        [](py::handle layout) { return get_kv_cache_stride_order(layout_arg(layout, "layout")); },
        "layout"_a = "NHD", "Physical dim i is logical dim order[i]: NHD (0,1,2,3,4), HND (0,1,3,2,4).");
  m.def("kv_cache_strides",
        [](const KVCacheShape& shape, py::handle layout) {
          return kv_cache_strides(shape, layout_arg(layout, "layout"));
        },
        "shape"_a, "layout"_a = "NHD", "Logical-order strides (elements) of a cache laid out in layout.");
  m.def("kv_cache_bytes_per_block",
        [](int block_size, int num_kv_heads, int head_size, py::handle storage) {
          return kv_cache_bytes_per_block(block_size, num_kv_heads, head_size, dtype_arg(storage, "dtype"));
        },
        "block_size"_a, "num_kv_heads"_a, "head_size"_a, "dtype"_a);
  m.def("kv_cache_storage_dtype",
        [](py::handle kv, py::handle model_dtype) {
          return std::string(dtype_name(kv_cache_storage_dtype(kv_cache_dtype_arg(kv, "kv_cache_dtype"),
                                                               dtype_arg(model_dtype, "dtype"))));
        },
        "kv_cache_dtype"_a, "dtype"_a, "The element type stored in the cache ('bf16', 'fp8_e4m3', ...).");
  m.def("get_kv_cache_layout", [] { return std::string(kv_cache_layout_name(get_kv_cache_layout())); });
  m.def("set_kv_cache_layout", [](py::handle layout) { set_kv_cache_layout(layout_arg(layout, "layout")); },
        "layout"_a);
}

}  // namespace pagedattn::python
