// One registration function per part of the public API; module.cc calls them in order.
#pragma once

#include <pybind11/pybind11.h>

namespace pagedattn::python {

void bind_core(pybind11::module_& m);      // build info, devices, KV-cache geometry
void bind_selector(pybind11::module_& m);  // backends, the registry and select_backend
void bind_metadata(pybind11::module_& m);  // CommonAttentionMetadata, split and reorder
void bind_engine(pybind11::module_& m);    // builders, built metadata, impls
void bind_ops(pybind11::module_& m);       // merge_attn_states, the cascade rule

}  // namespace pagedattn::python
