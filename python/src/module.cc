// pagedattn._C: the public C++ API for Python. Tensors cross as DLPack views (tensor_arg.h).
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "build_info.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "pagedattn: paged-KV attention backends (the C++ library's public API)";
  pagedattn::python::bind_core(m);
  pagedattn::python::bind_build_info(m);
  pagedattn::python::bind_selector(m);
  pagedattn::python::bind_metadata(m);
  pagedattn::python::bind_engine(m);
  pagedattn::python::bind_ops(m);
}
