// CommonAttentionMetadata (one per scheduling step) and vLLM's batch split and reorder.
#include <pybind11/stl.h>

#include "bindings.h"
#include "common_metadata.h"
#include "errors.h"

namespace pagedattn::python {

namespace py = pybind11;
using namespace pybind11::literals;

CommonAttentionMetadata PyCommonMetadata::view(Borrowed& b) const {
  CommonAttentionMetadata m;
  m.query_start_loc = b.view(query_start_loc, "query_start_loc");
  m.query_start_loc_cpu = query_start_loc_cpu.is_none() ? m.query_start_loc
                                                        : b.view(query_start_loc_cpu, "query_start_loc_cpu");
  m.seq_lens = b.view(seq_lens, "seq_lens");
  m.seq_lens_cpu = seq_lens_cpu.is_none() ? m.seq_lens : b.view(seq_lens_cpu, "seq_lens_cpu");
  m.num_reqs = num_reqs;
  m.num_actual_tokens = num_actual_tokens;
  m.max_query_len = max_query_len;
  m.max_seq_len = max_seq_len;
  m.block_table_tensor = b.view(block_table_tensor, "block_table_tensor");
  m.slot_mapping = b.optional_view(slot_mapping, "slot_mapping");
  m.causal = causal;
  m.is_prefilling = b.optional_view(is_prefilling, "is_prefilling");
  return m;
}

py::tuple PyCommonMetadata::arrays() const {
  return py::make_tuple(query_start_loc, query_start_loc_cpu, seq_lens, seq_lens_cpu, block_table_tensor,
                        slot_mapping, is_prefilling);
}

namespace {

std::string fields(const DecodePrefillSplit& s) {
  return "num_decodes=" + std::to_string(s.num_decodes) + ", num_prefills=" + std::to_string(s.num_prefills) +
         ", num_decode_tokens=" + std::to_string(s.num_decode_tokens) +
         ", num_prefill_tokens=" + std::to_string(s.num_prefill_tokens);
}

}  // namespace

void bind_metadata(py::module_& m) {
  py::class_<PyCommonMetadata>(m, "CommonAttentionMetadata",
                               "One scheduling step, shared by every layer and backend (vLLM v1's).")
      .def(py::init([](py::object query_start_loc, py::object seq_lens, py::object block_table_tensor,
                       int num_reqs, int num_actual_tokens, int max_query_len, int max_seq_len,
                       py::object slot_mapping, py::object query_start_loc_cpu, py::object seq_lens_cpu,
                       bool causal, py::object is_prefilling) {
             PyCommonMetadata p;
             p.query_start_loc = std::move(query_start_loc);
             p.query_start_loc_cpu = std::move(query_start_loc_cpu);
             p.seq_lens = std::move(seq_lens);
             p.seq_lens_cpu = std::move(seq_lens_cpu);
             p.num_reqs = num_reqs;
             p.num_actual_tokens = num_actual_tokens;
             p.max_query_len = max_query_len;
             p.max_seq_len = max_seq_len;
             p.block_table_tensor = std::move(block_table_tensor);
             p.slot_mapping = std::move(slot_mapping);
             p.causal = causal;
             p.is_prefilling = std::move(is_prefilling);
             return p;
           }),
           py::kw_only(), "query_start_loc"_a, "seq_lens"_a, "block_table_tensor"_a, "num_reqs"_a,
           "num_actual_tokens"_a, "max_query_len"_a, "max_seq_len"_a, "slot_mapping"_a = py::none(),
           "query_start_loc_cpu"_a = py::none(), "seq_lens_cpu"_a = py::none(), "causal"_a = true,
           "is_prefilling"_a = py::none(),
           "Host copies left out (None) are the device arrays themselves, which must then be on the host.")
      .def_readwrite("query_start_loc", &PyCommonMetadata::query_start_loc)
      .def_readwrite("query_start_loc_cpu", &PyCommonMetadata::query_start_loc_cpu)
      .def_readwrite("seq_lens", &PyCommonMetadata::seq_lens)
      .def_readwrite("seq_lens_cpu", &PyCommonMetadata::seq_lens_cpu)
      .def_readwrite("num_reqs", &PyCommonMetadata::num_reqs)
      .def_readwrite("num_actual_tokens", &PyCommonMetadata::num_actual_tokens)
      .def_readwrite("max_query_len", &PyCommonMetadata::max_query_len)
      .def_readwrite("max_seq_len", &PyCommonMetadata::max_seq_len)
      .def_readwrite("block_table_tensor", &PyCommonMetadata::block_table_tensor)
      .def_readwrite("slot_mapping", &PyCommonMetadata::slot_mapping)
      .def_readwrite("causal", &PyCommonMetadata::causal)
      .def_readwrite("is_prefilling", &PyCommonMetadata::is_prefilling)
      .def("batch_size", [](const PyCommonMetadata& p) { return p.num_reqs; })
      .def("naive_query_lens",
           [](const PyCommonMetadata& p) {
             Borrowed b;
             return p.view(b).naive_query_lens();
           },
           "query_start_loc_cpu[r + 1] - query_start_loc_cpu[r] for every request.")
      .def("validate",
           [](const PyCommonMetadata& p, int block_size, int64_t num_blocks) {
             Borrowed b;
             check(p.view(b).validate(block_size, num_blocks));
           },
           "block_size"_a, "num_blocks"_a,
           "Checks every field against the others and the cache geometry; ValueError naming the field.");

  py::class_<DecodePrefillSplit>(m, "DecodePrefillSplit")
      .def_readonly("num_decodes", &DecodePrefillSplit::num_decodes)
      .def_readonly("num_prefills", &DecodePrefillSplit::num_prefills)
      .def_readonly("num_decode_tokens", &DecodePrefillSplit::num_decode_tokens)
      .def_readonly("num_prefill_tokens", &DecodePrefillSplit::num_prefill_tokens)
      .def("__iter__", [](const DecodePrefillSplit& s) {
        return py::iter(py::make_tuple(s.num_decodes, s.num_prefills, s.num_decode_tokens, s.num_prefill_tokens));
      })
      .def("__eq__", [](const DecodePrefillSplit& a, const DecodePrefillSplit& b) { return a == b; })
      .def("__repr__", [](const DecodePrefillSplit& s) { return "DecodePrefillSplit(" + fields(s) + ")"; });
  m.def("split_decodes_and_prefills",
        [](const PyCommonMetadata& p, int decode_threshold, bool require_uniform,
           bool treat_short_extends_as_decodes) {
          Borrowed b;
          return split_decodes_and_prefills(p.view(b), decode_threshold, require_uniform,
                                            treat_short_extends_as_decodes);
        },
        "common_attn_metadata"_a, "decode_threshold"_a = 1, "require_uniform"_a = false,
        "treat_short_extends_as_decodes"_a = true,
        "vLLM's split of a decode-first batch: (num_decodes, num_prefills, num_decode_tokens, "
        "num_prefill_tokens).");

  py::class_<ScheduledRequest>(m, "ScheduledRequest")
      .def(py::init([](int num_scheduled_tokens, int num_computed_tokens, int num_prompt_tokens) {
             return ScheduledRequest{num_scheduled_tokens, num_computed_tokens, num_prompt_tokens};
           }),
           "num_scheduled_tokens"_a, "num_computed_tokens"_a, "num_prompt_tokens"_a)
      .def_readwrite("num_scheduled_tokens", &ScheduledRequest::num_scheduled_tokens)
      .def_readwrite("num_computed_tokens", &ScheduledRequest::num_computed_tokens)
      .def_readwrite("num_prompt_tokens", &ScheduledRequest::num_prompt_tokens);
  py::class_<BatchReorder>(m, "BatchReorder")
      .def_readonly("order", &BatchReorder::order, "order[i] = original index of the request now at i")
      .def_readonly("modified", &BatchReorder::modified);
  m.def("reorder_batch_to_split_decodes_and_prefills",
        [](const std::vector<ScheduledRequest>& requests, int decode_threshold) {
          return reorder_batch_to_split_decodes_and_prefills(requests, decode_threshold);
        },
        "requests"_a, "decode_threshold"_a = 1,
        "vLLM's swap-cycle reorder: decodes, short extends, long extends, then new prefills.");
}

}  // namespace pagedattn::python
