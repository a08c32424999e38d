// The engine objects Python holds: a builder (once per KV-cache group), the metadata it built for
// one step, and an impl (once per layer). Each keeps alive what the C++ object points into.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "pagedattn/backend.h"

namespace pagedattn::python {

namespace py = pybind11;

struct PyBuilder {
  const AttentionBackend* backend = nullptr;
  BuilderParams params;
  std::unique_ptr<AttentionMetadataBuilder> builder;
};

// A step's backend metadata. It points into the step's tensors (block table, lengths) and the
// builder's persistent buffers, so it holds both.
struct PyAttentionMetadata {
  std::unique_ptr<AttentionMetadata> metadata;
  py::object builder;  // the PyBuilder
  py::tuple tensors;   // the CommonAttentionMetadata tensors it was built over
  Device device;
  int num_actual_tokens = 0;
};

struct PyImpl {
  const AttentionBackend* backend = nullptr;
  std::unique_ptr<AttentionImpl> impl;
};

PyBuilder make_builder(const AttentionBackend& backend, const BuilderParams& params);
PyImpl make_impl(const AttentionBackend& backend, const AttentionImplParams& params);

}  // namespace pagedattn::python
