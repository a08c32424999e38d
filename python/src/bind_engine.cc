// Builders, the metadata they build and impls: the per-step and per-layer calls of an engine.
// forward and do_kv_cache_update convert their arrays to views, release the GIL and call the
// library on the caller's stream; nothing here synchronises the host.
#include <pybind11/stl.h>

#include <chrono>

#include "args.h"
#include "bindings.h"
#include "common_metadata.h"
#include "engine.h"
#include "errors.h"
#include "kv_views.h"

namespace pagedattn::python {

namespace py = pybind11;
using namespace pybind11::literals;

PyBuilder make_builder(const AttentionBackend& backend, const BuilderParams& params) {
  return PyBuilder{&backend, params, unwrap(backend.make_builder(params))};
}

PyImpl make_impl(const AttentionBackend& backend, const AttentionImplParams& params) {
  return PyImpl{&backend, unwrap(backend.make_impl(params))};
}

namespace {

// build(common_prefix_len, meta), or build_for_cudagraph_capture(meta) when `for_capture`.
py::object build(py::object self, int common_prefix_len, const PyCommonMetadata& meta, bool for_capture) {
  PyBuilder& b = self.cast<PyBuilder&>();
  Borrowed borrowed;
  const CommonAttentionMetadata view = meta.view(borrowed);
  PyAttentionMetadata out;
  out.metadata = unwrap(for_capture ? b.builder->build_for_cudagraph_capture(view)
                                    : b.builder->build(common_prefix_len, view));
  out.builder = std::move(self);
  out.tensors = meta.arrays();
  out.device = b.params.device;
  out.num_actual_tokens = meta.num_actual_tokens;
  return py::cast(std::move(out));
}

KVScales scales(Borrowed& b, py::handle k_scale, py::handle v_scale, StreamHandle stream) {
  return {scale_view(b.optional_view(k_scale, "k_scale", stream), "k_scale"),
          scale_view(b.optional_view(v_scale, "v_scale", stream), "v_scale")};
}

// An fp8_e4m3 query's scale: a scalar tensor as [1]; [1] or [num_reqs, Hkv] as they are (the
// library checks them).
TensorView q_scale_view(Borrowed& b, py::handle q_scale, StreamHandle stream) {
  const TensorView s = b.optional_view(q_scale, "q_scale", stream);
  if (!s.defined() || s.rank() != 0) return s;
  const int64_t one[] = {1};
  return TensorView(s.data(), s.dtype(), s.device(), one, one);
}

struct ForwardArgs {
  TensorView query, key, value;
  KVCacheView kv_cache;
  TensorView output, output_lse;
  KVScales scales;
  StreamHandle stream = nullptr;
};

// The arrays of one forward call. `kv_cache` is the whole cache, or None with key_cache/value_cache
// given as the two halves (vLLM's flash_attn_varlen_func passes them that way).
ForwardArgs forward_args(Borrowed& b, const PyImpl& impl, py::handle query, py::handle key, py::handle value,
                         py::handle kv_cache, py::handle key_cache, py::handle value_cache, py::handle output,
                         py::handle output_lse, py::handle k_scale, py::handle v_scale, py::handle stream,
                         py::handle q_scale) {
  ForwardArgs a;
  a.stream = resolve_stream(stream, impl.impl->params().device);
  a.query = b.view(query, "query", a.stream);
  a.key = b.optional_view(key, "key", a.stream);
  a.value = b.optional_view(value, "value", a.stream);
  a.kv_cache = kv_cache.is_none() ? paged_kv_view(b.view(key_cache, "key_cache", a.stream),
                                                  b.view(value_cache, "value_cache", a.stream))
                                  : KVCacheView(b.view(kv_cache, "kv_cache", a.stream));
  a.output = b.view(output, "output", a.stream);
  a.output_lse = b.optional_view(output_lse, "output_lse", a.stream);
  a.scales = scales(b, k_scale, v_scale, a.stream);
  a.scales.q_scale = q_scale_view(b, q_scale, a.stream);
  return a;
}

Status run_forward(PyImpl& impl, const ForwardArgs& a, const PyAttentionMetadata& md) {
  py::gil_scoped_release release;
  return impl.impl->forward(a.query, a.key, a.value, a.kv_cache, *md.metadata, a.output, a.output_lse,
                            a.scales, a.stream);
}

#define PAGEDATTN_FORWARD_ARGS                                                                    \
  "output"_a, "output_lse"_a = py::none(), "k_scale"_a = py::none(), "v_scale"_a = py::none(), \
      "stream"_a = py::none(), "q_scale"_a = py::none()

}  // namespace

void bind_engine(py::module_& m) {
  py::class_<PyBuilder>(m, "AttentionMetadataBuilder",
                        "Builds each step's backend metadata (once per step, shared by every layer).")
      .def_property_readonly("backend", [](const PyBuilder& b) { return std::string(b.backend->name()); })
      .def("cudagraph_support",
           [](const PyBuilder& b) { return std::string(cg_support_name(b.builder->cudagraph_support())); },
           "'NEVER', 'UNIFORM_SINGLE_TOKEN_DECODE', 'UNIFORM_BATCH' or 'ALWAYS'.")
      .def("reorder_batch_threshold", [](const PyBuilder& b) { return b.builder->reorder_batch_threshold(); },
           "Requests with query_len <= threshold must come first; None = any order.")
      .def("build",
           [](py::object self, int common_prefix_len, const PyCommonMetadata& meta) {
             return build(std::move(self), common_prefix_len, meta, false);
           },
           "common_prefix_len"_a, "common_attn_metadata"_a,
           "The step's metadata; common_prefix_len > 0 runs that shared prefix as cascade (the engine "
           "decides, e.g. with use_cascade_attention). It refers to the step's arrays: change them in "
           "place, not by rebinding.")
      .def("build_for_cudagraph_capture",
           [](py::object self, const PyCommonMetadata& meta) { return build(std::move(self), 0, meta, true); },
           "common_attn_metadata"_a,
           "Metadata for a forward that is captured in a CUDA graph, whose launches stay valid when the "
           "graph replays after later builds (build again this way before each replay).")
      .def("use_cascade_attention",
           [](const PyBuilder& b, int common_prefix_len, const std::vector<int32_t>& query_lens,
              int num_query_heads, int num_kv_heads, bool use_alibi, bool use_sliding_window,
              bool use_local_attention, int num_sms, int dcp_world_size) {
             return b.builder->use_cascade_attention(common_prefix_len, query_lens, num_query_heads, num_kv_heads,
                                                     use_alibi, use_sliding_window, use_local_attention, num_sms,
                                                     dcp_world_size);
           },
           "common_prefix_len"_a, "query_lens"_a, "num_query_heads"_a, "num_kv_heads"_a, "use_alibi"_a = false,
           "use_sliding_window"_a = false, "use_local_attention"_a = false, "num_sms"_a = 1,
           "dcp_world_size"_a = 1);

  py::class_<PyAttentionMetadata>(m, "AttentionMetadata", "One step's metadata, as a builder built it.")
      .def_property_readonly("device", [](const PyAttentionMetadata& md) { return device_name(md.device); })
      .def_readonly("num_actual_tokens", &PyAttentionMetadata::num_actual_tokens)
      .def_readonly("arrays", &PyAttentionMetadata::tensors,
                    "The CommonAttentionMetadata arrays it was built over (kept alive here).");

  py::class_<PyImpl>(m, "AttentionImpl", "One layer's attention (vLLM's AttentionImpl).")
      .def_property_readonly("backend", [](const PyImpl& i) { return std::string(i.backend->name()); })
      .def("kernel_generation", [](const PyImpl& i) { return std::string(i.impl->kernel_generation()); })
      .def_property_readonly("num_heads", [](const PyImpl& i) { return i.impl->params().num_heads; })
      .def_property_readonly("num_kv_heads", [](const PyImpl& i) { return i.impl->params().num_kv_heads; })
      .def_property_readonly("head_size", [](const PyImpl& i) { return i.impl->params().head_size; })
      .def_property_readonly("scale", [](const PyImpl& i) { return i.impl->params().resolved_scale(); })
      .def_property_readonly("dtype", [](const PyImpl& i) { return std::string(dtype_name(i.impl->params().dtype)); })
      .def_property_readonly("kv_cache_dtype",
                             [](const PyImpl& i) { return std::string(kv_cache_dtype_name(i.impl->params().kv_cache_dtype)); })
      .def_property_readonly("kv_layout",
                             [](const PyImpl& i) { return std::string(kv_cache_layout_name(i.impl->params().kv_layout)); })
      .def_property_readonly("sliding_window",
                             [](const PyImpl& i) {
                               const SlidingWindow w = i.impl->params().sliding_window;
                               return py::make_tuple(w.left, w.right);
                             })
      .def_property_readonly("device", [](const PyImpl& i) { return device_name(i.impl->params().device); })
      .def("do_kv_cache_update",
           [](PyImpl& impl, py::handle key, py::handle value, py::handle kv_cache, py::handle slot_mapping,
              py::handle k_scale, py::handle v_scale, py::handle stream) {
             Borrowed b;
             const StreamHandle s = resolve_stream(stream, impl.impl->params().device);
             const TensorView k = b.view(key, "key", s), v = b.view(value, "value", s);
             const TensorView cache = b.view(kv_cache, "kv_cache", s), slots = b.view(slot_mapping, "slot_mapping", s);
             const KVScales sc = scales(b, k_scale, v_scale, s);
             Status status;
             {
               py::gil_scoped_release release;
               status = impl.impl->do_kv_cache_update(k, v, cache, slots, sc, s);
             }
             check(status);
           },
           "key"_a, "value"_a, "kv_cache"_a, "slot_mapping"_a, "k_scale"_a = py::none(), "v_scale"_a = py::none(),
           "stream"_a = py::none(),
           "Writes key/value [num_tokens, Hkv, D] at slot_mapping (-1 skipped), encoding to the cache dtype.")
      .def("do_kv_cache_update_split",
           [](PyImpl& impl, py::handle key, py::handle value, py::handle key_cache, py::handle value_cache,
              py::handle slot_mapping, py::handle k_scale, py::handle v_scale, py::handle stream) {
             Borrowed b;
             const StreamHandle s = resolve_stream(stream, impl.impl->params().device);
             const TensorView k = b.view(key, "key", s), v = b.view(value, "value", s);
             const KVCacheView cache =
                 paged_kv_view(b.view(key_cache, "key_cache", s), b.view(value_cache, "value_cache", s));
             const TensorView slots = b.view(slot_mapping, "slot_mapping", s);
             const KVScales sc = scales(b, k_scale, v_scale, s);
             Status status;
             {
               py::gil_scoped_release release;
               status = impl.impl->do_kv_cache_update(k, v, cache, slots, sc, s);
             }
             check(status);
           },
           "key"_a, "value"_a, "key_cache"_a, "value_cache"_a, "slot_mapping"_a, "k_scale"_a = py::none(),
           "v_scale"_a = py::none(), "stream"_a = py::none(),
           "do_kv_cache_update with the cache as its K and V halves [num_blocks, block_size, Hkv, D].")
      .def("forward",
           [](PyImpl& impl, py::handle query, py::handle key, py::handle value, py::handle kv_cache,
              const PyAttentionMetadata& md, py::handle output, py::handle output_lse, py::handle k_scale,
              py::handle v_scale, py::handle stream, py::handle q_scale) {
             Borrowed b;
             const ForwardArgs a = forward_args(b, impl, query, key, value, kv_cache, py::none(), py::none(),
                                                output, output_lse, k_scale, v_scale, stream, q_scale);
             check(run_forward(impl, a, md));
           },
           "query"_a, "key"_a, "value"_a, "kv_cache"_a, "attn_metadata"_a, PAGEDATTN_FORWARD_ARGS,
           "Attention of query [T, Hq, D] over the paged cache into output [T, Hq, D]; output_lse "
           "[Hq, T] float32 (natural log) when given. key/value: the new tokens (may be None once cached). "
           "An fp8_e4m3 query is q_scale (None, [1] or [num_reqs, Hkv]) times its values.")
      .def("forward_split",
           [](PyImpl& impl, py::handle query, py::handle key_cache, py::handle value_cache,
              const PyAttentionMetadata& md, py::handle output, py::handle output_lse, py::handle k_scale,
              py::handle v_scale, py::handle stream, py::handle q_scale) {
             Borrowed b;
             const ForwardArgs a = forward_args(b, impl, query, py::none(), py::none(), py::none(), key_cache,
                                                value_cache, output, output_lse, k_scale, v_scale, stream, q_scale);
             check(run_forward(impl, a, md));
           },
           "query"_a, "key_cache"_a, "value_cache"_a, "attn_metadata"_a, PAGEDATTN_FORWARD_ARGS,
           "forward with the cache as its K and V halves [num_blocks, block_size, Hkv, D].")
      .def("time_forward_host",
           [](PyImpl& impl, py::handle query, py::handle kv_cache, const PyAttentionMetadata& md, py::handle output,
              py::handle stream, int iterations) {
             // The C++ caller's cost per call, for comparing with a call from Python: the same
             // forward, looped in C++ (host time; GPU work is left queued on the stream).
             Borrowed b;
             const ForwardArgs a = forward_args(b, impl, query, py::none(), py::none(), kv_cache, py::none(),
                                                py::none(), output, py::none(), py::none(), py::none(), stream,
                                                py::none());
             py::gil_scoped_release release;
             const auto start = std::chrono::steady_clock::now();
             for (int i = 0; i < iterations; ++i) {
               if (Status s = impl.impl->forward(a.query, a.key, a.value, a.kv_cache, *md.metadata, a.output,
                                                 a.output_lse, a.scales, a.stream);
                   !s.ok()) {
                 py::gil_scoped_acquire acquire;
                 raise_status(s);
               }
             }
             const auto stop = std::chrono::steady_clock::now();
             return std::chrono::duration<double, std::micro>(stop - start).count() / iterations;
           },
           "query"_a, "kv_cache"_a, "attn_metadata"_a, "output"_a, "stream"_a = py::none(), "iterations"_a = 100,
           "Microseconds per forward call when looped in C++ (host time; benchmarking only).");
}

}  // namespace pagedattn::python
