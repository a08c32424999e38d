// pagedattn._C._build_info: what the module was built from and with (python/src/build_info.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace pagedattn::python {

void bind_build_info(pybind11::module_& m);

}  // namespace pagedattn::python
