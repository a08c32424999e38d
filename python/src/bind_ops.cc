// Operations shared by every backend: merge_attn_states, dequantize_fp8_query and vLLM's cascade
// rule.
#include <pybind11/stl.h>

#include "bindings.h"
#include "errors.h"
#include "pagedattn/ops.h"
#include "tensor_arg.h"

namespace pagedattn::python {

namespace py = pybind11;
using namespace pybind11::literals;

void bind_ops(py::module_& m) {
  m.def("merge_attn_states",
        [](py::handle output, py::handle prefix_output, py::handle prefix_lse, py::handle suffix_output,
           py::handle suffix_lse, py::handle output_lse, std::optional<int64_t> prefill_tokens_with_context,
           py::handle stream) {
          Borrowed b;
          const TensorView out = b.view(output, "output");
          const StreamHandle s = resolve_stream(stream, out.device());
          const TensorView po = b.view(prefix_output, "prefix_output", s), pl = b.view(prefix_lse, "prefix_lse", s);
          const TensorView so = b.view(suffix_output, "suffix_output", s), sl = b.view(suffix_lse, "suffix_lse", s);
          const TensorView ol = b.optional_view(output_lse, "output_lse", s);
          Status status;
          {
            py::gil_scoped_release release;
            status = merge_attn_states(out, po, pl, so, sl, ol, prefill_tokens_with_context, s);
          }
          check(status);
        },
        "output"_a, "prefix_output"_a, "prefix_lse"_a, "suffix_output"_a, "suffix_lse"_a, "output_lse"_a = py::none(),
        "prefill_tokens_with_context"_a = py::none(), "stream"_a = py::none(),
        "vLLM's merge_attn_states: outputs [T, H, D], LSEs [H, T] float32 natural log; +-inf LSE = empty.");
  m.def("dequantize_fp8_query",
        [](py::handle output, py::handle query, py::handle scale, py::handle cu_seqlens_q, py::handle stream) {
          Borrowed b;
          const TensorView out = b.view(output, "output");
          const StreamHandle s = resolve_stream(stream, out.device());
          const TensorView q = b.view(query, "query", s);
          const TensorView sc = b.optional_view(scale, "scale", s), cu = b.optional_view(cu_seqlens_q, "cu_seqlens_q", s);
          Status status;
          {
            py::gil_scoped_release release;
            status = dequantize_fp8_query(out, q, sc, cu, s);
          }
          check(status);
        },
        "output"_a, "query"_a, "scale"_a = py::none(), "cu_seqlens_q"_a = py::none(), "stream"_a = py::none(),
        "output [T, H, D] f16/bf16 = query (float8_e4m3fn) x scale: None, [1] or [num_reqs, num_kv_heads] "
        "with cu_seqlens_q.");
  m.def("cascade_attention_pays_off",
        [](int common_prefix_len, const std::vector<int32_t>& query_lens, int num_query_heads, int num_kv_heads,
           bool use_alibi, bool use_sliding_window, bool use_local_attention, int num_sms, int dcp_world_size) {
          return cascade_attention_pays_off(common_prefix_len, query_lens, num_query_heads, num_kv_heads,
                                            use_alibi, use_sliding_window, use_local_attention, num_sms,
                                            dcp_world_size);
        },
        "common_prefix_len"_a, "query_lens"_a,
        "num_query_heads"_a, "num_kv_heads"_a, "use_alibi"_a = false, "use_sliding_window"_a = false,
        "use_local_attention"_a = false, "num_sms"_a = 1, "dcp_world_size"_a = 1,
        "FlashAttention's use_cascade_attention rule.");
}

}  // namespace pagedattn::python
