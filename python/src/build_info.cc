// pagedattn._C._build_info(): the facts of this build as a dict; pagedattn.build_info() adds where
// the package was imported from.
#include "build_info.h"

#include <algorithm>
#include <string>

#include "pagedattn/config.h"
#include "pagedattn_build_info.h"  // generated at build time by cmake/build_info.cmake

namespace pagedattn::python {

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

// "90a,80" -> ["90a", "80"]; empty without CUDA, where no kernels were compiled.
py::list csv_list(const std::string& csv, bool as_int) {
  py::list out;
  if (!PAGEDATTN_WITH_CUDA) return out;
  size_t start = 0;
  while (start < csv.size()) {
    const size_t end = std::min(csv.find(',', start), csv.size());
    const std::string item = csv.substr(start, end - start);
    if (as_int) {
      out.append(std::stoi(item));
    } else {
      out.append(item);
    }
    start = end + 1;
  }
  return out;
}

}  // namespace

void bind_build_info(py::module_& m) {
  m.def("_build_info", [] {
    return py::dict("version"_a = PAGEDATTN_VERSION, "commit"_a = PAGEDATTN_GIT_COMMIT,
                    "dirty"_a = static_cast<bool>(PAGEDATTN_GIT_DIRTY),
                    "cuda"_a = static_cast<bool>(PAGEDATTN_WITH_CUDA),
                    "cuda_archs"_a = csv_list(PAGEDATTN_CUDA_ARCHS, false),
                    "head_sizes"_a = csv_list(PAGEDATTN_HEAD_SIZES, true),
                    "build_type"_a = PAGEDATTN_BUILD_TYPE, "source_dir"_a = PAGEDATTN_SOURCE_DIR,
                    "python"_a = PAGEDATTN_PYTHON_VERSION);
  }, "The facts of this build (pagedattn.build_info() adds the package's location).");
}

}  // namespace pagedattn::python
