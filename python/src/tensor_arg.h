// Caller arrays as TensorViews, without copies: anything with __dlpack__ (NumPy >= 1.22, CuPy, ...)
// or a "dltensor" capsule through our DLPack consumer, and PyTorch tensors through their own
// attributes (the same view, cheaper). Each view is checked for a dtype, device and rank the library
// can read; the operation itself checks shapes and strides, naming the argument.
#pragma once

#include <pybind11/pybind11.h>

#include <vector>

#include "dlpack_abi.h"
#include "pagedattn/backend.h"
#include "pagedattn/tensor.h"

namespace pagedattn::python {

namespace py = pybind11;

// The tensors one call borrows: each stays alive (the producer's reference held) until this object
// goes out of scope after the call, then goes back to its producer through its deleter.
class Borrowed {
 public:
  Borrowed() { held_.reserve(8); }
  Borrowed(const Borrowed&) = delete;
  Borrowed& operator=(const Borrowed&) = delete;
  ~Borrowed();

  // A view over `array`; ValueError naming `name` when it cannot be viewed. CUDA producers other
  // than PyTorch are asked to make their data ready on `stream` (the DLPack stream contract).
  TensorView view(py::handle array, const char* name, StreamHandle stream = nullptr);
  // None gives an undefined view (an optional argument left out).
  TensorView optional_view(py::handle array, const char* name, StreamHandle stream = nullptr);

 private:
  std::vector<dlpack::ManagedTensor*> held_;
};

// The stream GPU work goes on: `stream` as an int handle or an object with `cuda_stream` (PyTorch)
// or `ptr` (CuPy); when None and the device is CUDA, PyTorch's current stream if PyTorch is
// imported, else the default stream. CPU work has no stream.
StreamHandle resolve_stream(py::handle stream, const Device& device);

// Host float values from a sequence or a 1-D host array (ALiBi slopes, sinks).
std::vector<float> host_floats(py::handle values, const char* name);

}  // namespace pagedattn::python
