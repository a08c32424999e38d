// Backends (what each serves), the registry and the selector, with every rejection's reasons.
#include <pybind11/stl.h>

#include "args.h"
#include "bindings.h"
#include "engine.h"
#include "errors.h"
#include "pagedattn/selector.h"
#include "tensor_arg.h"

namespace pagedattn::python {

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

// The registry's backends live for the whole process.
using BackendHolder = std::unique_ptr<AttentionBackend, py::nodelete>;

AttentionSelectorConfig selector_config(int head_size, int num_heads, int num_kv_heads, py::handle dtype,
                                        py::handle kv_cache_dtype, std::optional<int> block_size,
                                        bool has_sinks, bool use_alibi, bool use_sliding_window,
                                        bool use_soft_cap, bool causal, py::handle attn_type,
                                        bool use_per_head_quant_scales, py::handle device,
                                        py::handle compute_capability) {
  AttentionSelectorConfig c;
  c.head_size = head_size;
  c.num_heads = num_heads;
  c.num_kv_heads = num_kv_heads;
  c.dtype = dtype_arg(dtype, "dtype");
  c.kv_cache_dtype = kv_cache_dtype_arg(kv_cache_dtype, "kv_cache_dtype");
  c.block_size = block_size;
  c.has_sinks = has_sinks;
  c.use_alibi = use_alibi;
  c.use_sliding_window = use_sliding_window;
  c.use_soft_cap = use_soft_cap;
  c.causal = causal;
  c.attn_type = attn_type_arg(attn_type, "attn_type");
  c.use_per_head_quant_scales = use_per_head_quant_scales;
  c.device = device_arg(device, "device");
  c.compute_capability = compute_capability_arg(compute_capability, "compute_capability");
  return c;
}

// The selector's keyword arguments, in AttentionSelectorConfig's order.
#define PAGEDATTN_SELECTOR_ARGS                                                                   \
  "head_size"_a, "num_heads"_a, "num_kv_heads"_a, "dtype"_a = "bf16", "kv_cache_dtype"_a = "auto", \
      "block_size"_a = py::none(), "has_sinks"_a = false, "use_alibi"_a = false,                  \
      "use_sliding_window"_a = false, "use_soft_cap"_a = false, "causal"_a = true,                \
      "attn_type"_a = "decoder", "use_per_head_quant_scales"_a = false, "device"_a = py::none(),   \
      "compute_capability"_a = py::none()

std::vector<std::string> names(const std::vector<DType>& dtypes) {
  std::vector<std::string> out;
  for (DType d : dtypes) out.emplace_back(dtype_name(d));
  return out;
}

}  // namespace

void bind_selector(py::module_& m) {
  py::class_<AttentionBackend, BackendHolder>(m, "AttentionBackend",
                                              "What one backend serves, and its builder and impl factories.")
      .def_property_readonly("name", [](const AttentionBackend& b) { return std::string(b.name()); })
      .def("supported_dtypes", [](const AttentionBackend& b) { return names(b.supported_dtypes()); })
      .def("supported_kv_cache_dtypes",
           [](const AttentionBackend& b) {
             std::vector<std::string> out;
             for (KVCacheDType kv : b.supported_kv_cache_dtypes()) out.emplace_back(kv_cache_dtype_name(kv));
             return out;
           })
      .def("supported_kernel_block_sizes",
           [](const AttentionBackend& b) {
             std::vector<int> out;
             for (const MultipleOf& m : b.supported_kernel_block_sizes()) out.push_back(m.base);
             return out;
           },
           "Each entry n means 'any multiple of n'.")
      .def("kernel_generations", &AttentionBackend::kernel_generations,
           "The kernel generations this build has for the backend (\"v2 (mma.sync, sm_80+)\", ...).")
      .def("supports_head_size", &AttentionBackend::supports_head_size, "head_size"_a)
      .def("supported_head_sizes_text", &AttentionBackend::supported_head_sizes_text)
      .def("supports_block_size", &AttentionBackend::supports_block_size, "block_size"_a)
      .def(
          "supports_device",
          [](const AttentionBackend& b, py::handle device) {
            return b.supports_device(device_arg(device, "device").kind);
          },
          "device"_a, "Whether the backend runs on this kind of device (\"cpu\", \"cuda:0\", ...).")
      .def("preferred_block_size", &AttentionBackend::preferred_block_size, "default_block_size"_a = 16)
      .def("unavailable_reason", &AttentionBackend::unavailable_reason)
      .def("validate_configuration",
           [](const AttentionBackend& b, int head_size, int num_heads, int num_kv_heads, py::handle dtype,
              py::handle kv_cache_dtype, std::optional<int> block_size, bool has_sinks, bool use_alibi,
              bool use_sliding_window, bool use_soft_cap, bool causal, py::handle attn_type,
              bool use_per_head_quant_scales, py::handle device, py::handle compute_capability) {
             return b.validate_configuration(selector_config(
                 head_size, num_heads, num_kv_heads, dtype, kv_cache_dtype, block_size, has_sinks,
                 use_alibi, use_sliding_window, use_soft_cap, causal, attn_type, use_per_head_quant_scales,
                 device, compute_capability));
           },
           PAGEDATTN_SELECTOR_ARGS, "Every reason this backend cannot serve the config; empty = valid.")
      .def("get_kv_cache_shape",
           [](const AttentionBackend& b, int64_t num_blocks, int block_size, int num_kv_heads, int head_size,
              py::handle cache_dtype) {
             return unwrap(b.get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size,
                                                kv_cache_dtype_arg(cache_dtype, "cache_dtype")));
           },
           "num_blocks"_a, "block_size"_a, "num_kv_heads"_a, "head_size"_a, "cache_dtype"_a = "auto")
      .def("get_kv_cache_stride_order",
           [](const AttentionBackend& b, py::handle layout) {
             return b.get_kv_cache_stride_order(layout_arg(layout, "layout"));
           },
           "layout"_a = "NHD")
      .def("required_kv_cache_layout",
           [](const AttentionBackend& b) -> std::optional<std::string> {
             if (auto layout = b.required_kv_cache_layout()) return std::string(kv_cache_layout_name(*layout));
             return std::nullopt;
           })
      .def("forward_includes_kv_cache_update", &AttentionBackend::forward_includes_kv_cache_update)
      .def("make_builder",
           [](const AttentionBackend& b, int num_heads, int num_kv_heads, int head_size, int block_size,
              py::handle dtype, py::handle kv_cache_dtype, py::handle device,
              int max_num_reqs, int max_num_tokens, int max_model_len, bool use_alibi,
              py::handle sliding_window, int num_sms, bool deterministic, int max_num_splits) {
             BuilderParams p;
             p.num_heads = num_heads;
             p.num_kv_heads = num_kv_heads;
             p.head_size = head_size;
             p.block_size = block_size;
             p.dtype = dtype_arg(dtype, "dtype");
             p.kv_cache_dtype = kv_cache_dtype_arg(kv_cache_dtype, "kv_cache_dtype");
             p.device = device_arg(device, "device");
             p.max_num_reqs = max_num_reqs;
             p.max_num_tokens = max_num_tokens;
             p.max_model_len = max_model_len;
             p.use_alibi = use_alibi;
             p.sliding_window = window_arg(sliding_window, "sliding_window");
             p.num_sms = num_sms;
             p.deterministic = deterministic;
             p.max_num_splits = max_num_splits;
             return make_builder(b, p);
           },
           "num_heads"_a, "num_kv_heads"_a, "head_size"_a, "block_size"_a = 16, "dtype"_a = "bf16",
           "kv_cache_dtype"_a = "auto", "device"_a = py::none(), "max_num_reqs"_a = 256,
           "max_num_tokens"_a = 8192, "max_model_len"_a = 32768, "use_alibi"_a = false,
           "sliding_window"_a = py::none(), "num_sms"_a = 0, "deterministic"_a = false,
           "max_num_splits"_a = 0,
           "The metadata builder of one KV-cache group (vLLM's AttentionMetadataBuilder). The mask is "
           "the step's (CommonAttentionMetadata.causal); deterministic = batch invariance.")
      .def("make_impl",
           [](const AttentionBackend& b, int num_heads, int head_size, int num_kv_heads, py::handle scale,
              py::handle dtype, py::handle alibi_slopes, py::handle sliding_window, py::handle kv_cache_dtype,
              py::handle logits_soft_cap, py::handle attn_type, py::handle sinks, py::handle kv_layout,
              py::handle device, int kernel_generation, bool fp8_tensor_cores) {
             AttentionImplParams p;
             p.num_heads = num_heads;
             p.head_size = head_size;
             p.scale = scale.is_none() ? 0.0f : scale.cast<float>();
             p.num_kv_heads = num_kv_heads;
             p.dtype = dtype_arg(dtype, "dtype");
             p.alibi_slopes = host_floats(alibi_slopes, "alibi_slopes");
             p.sliding_window = window_arg(sliding_window, "sliding_window");
             p.kv_cache_dtype = kv_cache_dtype_arg(kv_cache_dtype, "kv_cache_dtype");
             p.logits_soft_cap = logits_soft_cap.is_none() ? 0.0f : logits_soft_cap.cast<float>();
             p.attn_type = attn_type_arg(attn_type, "attn_type");
             p.sinks = host_floats(sinks, "sinks");
             p.kv_layout = layout_arg(kv_layout, "kv_layout");
             p.device = device_arg(device, "device");
             p.kernel_generation = kernel_generation;
             p.fp8_tensor_cores = fp8_tensor_cores;
             return make_impl(b, p);
           },
           "num_heads"_a, "head_size"_a, "num_kv_heads"_a, "scale"_a = py::none(), "dtype"_a = "bf16",
           "alibi_slopes"_a = py::none(), "sliding_window"_a = py::none(), "kv_cache_dtype"_a = "auto",
           "logits_soft_cap"_a = py::none(), "attn_type"_a = "decoder", "sinks"_a = py::none(),
           "kv_layout"_a = "NHD", "device"_a = py::none(), "kernel_generation"_a = 0,
           "fp8_tensor_cores"_a = false,
           "One layer's impl (vLLM's AttentionImpl); scale None = 1/sqrt(head_size); kernel_generation "
           "0 = the backend's choice, 2 or 3 forces one (GPU backends); fp8_tensor_cores: prefills over "
           "an e4m3 cache may run on the FP8 tensor cores (Q and P rounded to e4m3 too).")
      .def("__repr__", [](const AttentionBackend& b) { return "<AttentionBackend " + std::string(b.name()) + ">"; });

  m.def("registered_backends",
        [] {
          std::vector<BackendHolder::pointer> out;
          for (const AttentionBackend* b : registered_backends()) out.push_back(const_cast<AttentionBackend*>(b));
          return py::cast(out, py::return_value_policy::reference);
        },
        "FLASH_ATTN, FLASHINFER and CPU_ATTN, in that order.");
  m.def("find_backend",
        [](const std::string& name) {
          return py::cast(const_cast<AttentionBackend*>(find_backend(name)), py::return_value_policy::reference);
        },
        "name"_a, "By registry name or alias ('FLASH_ATTN' / 'flash_attn', 'cpu', ...); None if unknown.");
  m.def("backend_priority",
        [](py::handle device) {
          std::vector<std::string> out;
          for (std::string_view n : backend_priority(device_arg(device, "device"))) out.emplace_back(n);
          return out;
        },
        "device"_a = py::none());

  py::class_<BackendSelection>(m, "BackendSelection")
      .def_property_readonly("backend",
                             [](const BackendSelection& s) {
                               return py::cast(const_cast<AttentionBackend*>(s.backend),
                                               py::return_value_policy::reference);
                             })
      .def_property_readonly("rejected",
                             [](const BackendSelection& s) {
                               std::vector<std::pair<std::string, std::vector<std::string>>> out;
                               for (const BackendRejection& r : s.rejected) out.emplace_back(r.backend, r.reasons);
                               return out;
                             },
                             "[(backend, [reason, ...]), ...]: every backend that cannot serve the config.")
      .def_property_readonly("kv_cache_layout",
                             [](const BackendSelection& s) { return std::string(kv_cache_layout_name(s.kv_cache_layout)); })
      .def_readonly("block_size", &BackendSelection::block_size)
      .def("__repr__", [](const BackendSelection& s) {
        std::string text = "<BackendSelection " + std::string(s.backend->name()) + ", block_size " +
                           std::to_string(s.block_size) + ", " + std::string(kv_cache_layout_name(s.kv_cache_layout));
        for (const BackendRejection& r : s.rejected) {
          text += "; " + r.backend + ":";
          for (size_t i = 0; i < r.reasons.size(); ++i) text += (i ? ", " : " ") + r.reasons[i];
        }
        return text + ">";
      });

  m.def("select_backend",
        [](int head_size, int num_heads, int num_kv_heads, py::handle dtype, py::handle kv_cache_dtype,
           std::optional<int> block_size, bool has_sinks, bool use_alibi, bool use_sliding_window,
           bool use_soft_cap, bool causal, py::handle attn_type, bool use_per_head_quant_scales,
           py::handle device, py::handle compute_capability, std::optional<std::string> backend) {
          const AttentionSelectorConfig config = selector_config(
              head_size, num_heads, num_kv_heads, dtype, kv_cache_dtype, block_size, has_sinks, use_alibi,
              use_sliding_window, use_soft_cap, causal, attn_type, use_per_head_quant_scales, device,
              compute_capability);
          std::optional<std::string_view> forced;
          if (backend) forced = *backend;
          return unwrap(select_backend(config, forced));
        },
        PAGEDATTN_SELECTOR_ARGS, "backend"_a = py::none(),
        "The first backend of the device's priority list that serves the config, with every rejection "
        "and its reasons; `backend` forces one (an error listing its reasons if it cannot serve).");
}

}  // namespace pagedattn::python
