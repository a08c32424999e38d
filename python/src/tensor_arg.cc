#include "tensor_arg.h"

#include <array>
#include <cstring>
#include <string>

#include "errors.h"

namespace pagedattn::python {
namespace {

std::string type_name(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__name__")); }

// PyTorch's C-level exporter and its Tensor type, looked up once PyTorch has been imported by the
// caller (this module never imports it). Calling the exporter directly skips __dlpack__'s Python
// preamble, whose only job (syncing a consumer stream) does not apply: the work goes on the current
// stream, which is the stream the tensor was produced on.
struct TorchHooks {
  PyObject* tensor_type = nullptr;
  PyObject* to_dlpack = nullptr;
  PyObject* current_raw_stream = nullptr;  // torch._C._cuda_getCurrentRawStream, when present
  PyObject* current_stream = nullptr;      // torch.cuda.current_stream (older PyTorch)
  bool ready = false;

  bool find() {
    if (ready) return true;
    PyObject* modules = PyImport_GetModuleDict();
    PyObject* torch = PyDict_GetItemString(modules, "torch");
    if (torch == nullptr) return false;
    py::module_ t = py::reinterpret_borrow<py::module_>(torch);
    py::object c = t.attr("_C");
    // Held for the life of the process (PyTorch is never unloaded).
    tensor_type = py::object(t.attr("Tensor")).release().ptr();
    to_dlpack = py::object(c.attr("_to_dlpack")).release().ptr();
    if (py::hasattr(c, "_cuda_getCurrentRawStream")) {
      current_raw_stream = py::object(c.attr("_cuda_getCurrentRawStream")).release().ptr();
    } else {
      current_stream = py::object(t.attr("cuda").attr("current_stream")).release().ptr();
    }
    ready = true;
    return true;
  }
};

TorchHooks& torch_hooks() {
  static TorchHooks hooks;
  return hooks;
}

bool is_torch_tensor(py::handle obj) {
  TorchHooks& hooks = torch_hooks();
  return hooks.find() && PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(hooks.tensor_type));
}

// PyTorch's FP8 dtypes travel as bytes where its DLPack exporter does not know them.
py::object torch_capsule(py::handle tensor, const char* name, std::optional<DType>& fp8_as) {
  // As torch.Tensor.__dlpack__ does: a view would let writes bypass autograd.
  if (PyObject_IsTrue(tensor.attr("requires_grad").ptr())) {
    raise_value_error(std::string(name) + ": the tensor requires grad; pass tensor.detach()");
  }
  PyObject* capsule = PyObject_CallOneArg(torch_hooks().to_dlpack, tensor.ptr());
  if (capsule != nullptr) return py::reinterpret_steal<py::object>(capsule);
  py::error_already_set error;
  const std::string dtype = py::str(tensor.attr("dtype"));
  if (dtype == "torch.float8_e4m3fn" || dtype == "torch.float8_e5m2") {
    fp8_as = dtype == "torch.float8_e4m3fn" ? DType::kFP8E4M3 : DType::kFP8E5M2;
    py::object bytes = tensor.attr("view")(py::module_::import("torch").attr("uint8"));
    capsule = PyObject_CallOneArg(torch_hooks().to_dlpack, bytes.ptr());
    if (capsule == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(capsule);
  }
  raise_value_error(std::string(name) + ": PyTorch cannot export it through DLPack: " + error.what());
}

py::object producer_capsule(py::handle array, const char* name, StreamHandle stream) {
  if (!py::hasattr(array, "__dlpack__")) {
    raise_value_error(std::string(name) + ": expected an array with __dlpack__ (torch.Tensor, "
                      "numpy.ndarray, cupy.ndarray) or a DLPack capsule, got " + type_name(array));
  }
  py::tuple device = array.attr("__dlpack_device__")();
  if (device[0].cast<int>() != dlpack::kCUDA) return array.attr("__dlpack__")();
  // DLPack: 1 names the legacy default stream (0 is not allowed).
  const auto handle = reinterpret_cast<intptr_t>(stream);
  return array.attr("__dlpack__")(py::arg("stream") = handle == 0 ? 1 : handle);
}

StatusOr<DType> view_dtype(const dlpack::DataType& t) {
  if (t.lanes == 1) {
    switch (t.code) {
      case dlpack::kFloat:
        if (t.bits == 32) return DType::kF32;
        if (t.bits == 16) return DType::kF16;
        break;
      case dlpack::kBfloat:
        if (t.bits == 16) return DType::kBF16;
        break;
      case dlpack::kFloat8E4M3FN:
        if (t.bits == 8) return DType::kFP8E4M3;
        break;
      case dlpack::kFloat8E5M2:
        if (t.bits == 8) return DType::kFP8E5M2;
        break;
      case dlpack::kUInt:
        if (t.bits == 8) return DType::kU8;
        break;
      case dlpack::kInt:
        if (t.bits == 32) return DType::kI32;
        if (t.bits == 64) return DType::kI64;
        break;
      default:
        break;
    }
  }
  return invalid_argument("DLPack dtype (code " + std::to_string(t.code) + ", " +
                          std::to_string(t.bits) + " bits, " + std::to_string(t.lanes) +
                          " lanes) is not supported (allowed: float32, float16, bfloat16, "
                          "float8_e4m3fn, float8_e5m2, uint8, int32, int64)");
}

TensorView to_view(const dlpack::Tensor& t, const char* name, std::optional<DType> fp8_as) {
  const std::string what(name);
  StatusOr<DType> dtype = view_dtype(t.dtype);
  if (!dtype.ok()) raise_value_error(what + ": " + dtype.status().message());
  Device device;
  switch (t.device.device_type) {
    case dlpack::kCPU:
    case dlpack::kCUDAHost:
      device = Device::cpu();
      break;
    case dlpack::kCUDA:
    case dlpack::kCUDAManaged:
      device = Device::cuda(t.device.device_id);
      break;
    default:
      raise_value_error(what + ": DLPack device type " + std::to_string(t.device.device_type) +
                        " is not supported (allowed: CPU, CUDA)");
  }
  if (t.ndim < 0 || t.ndim > TensorView::kMaxRank) {
    raise_value_error(what + ": rank " + std::to_string(t.ndim) + " is not supported (at most " +
                      std::to_string(TensorView::kMaxRank) + ")");
  }
  std::array<int64_t, TensorView::kMaxRank> strides{};
  int64_t step = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    strides[d] = t.strides != nullptr ? t.strides[d] : step;
    step *= t.shape[d];
  }
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  const auto rank = static_cast<size_t>(t.ndim);
  return TensorView(data, fp8_as.value_or(*dtype), device, std::span<const int64_t>(t.shape, rank),
                    std::span<const int64_t>(strides.data(), rank));
}

}  // namespace

Borrowed::~Borrowed() {
  for (dlpack::ManagedTensor* t : held_) {
    if (t->deleter != nullptr) t->deleter(t);
  }
}

TensorView Borrowed::view(py::handle array, const char* name, StreamHandle stream) {
  if (array.is_none()) raise_value_error(std::string(name) + " is required, got None");
  std::optional<DType> fp8_as;
  py::object capsule;
  if (PyCapsule_CheckExact(array.ptr())) {
    capsule = py::reinterpret_borrow<py::object>(array);
  } else if (is_torch_tensor(array)) {
    capsule = torch_capsule(array, name, fp8_as);
  } else {
    capsule = producer_capsule(array, name, stream);
  }
  if (!PyCapsule_IsValid(capsule.ptr(), dlpack::kCapsuleName)) {
    raise_value_error(std::string(name) + ": expected a fresh \"dltensor\" capsule (one not yet consumed)");
  }
  auto* managed = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), dlpack::kCapsuleName));
  // Ours now: the capsule's destructor must not release it too.
  PyCapsule_SetName(capsule.ptr(), dlpack::kUsedCapsuleName);
  held_.push_back(managed);
  if (fp8_as && managed->dl_tensor.dtype.bits != 8) fp8_as.reset();
  return to_view(managed->dl_tensor, name, fp8_as);
}

TensorView Borrowed::optional_view(py::handle array, const char* name, StreamHandle stream) {
  if (array.is_none()) return TensorView();
  return view(array, name, stream);
}

StreamHandle resolve_stream(py::handle stream, const Device& device) {
  if (!device.is_cuda()) return nullptr;
  py::object handle;
  if (!stream.is_none()) {
    if (PyLong_Check(stream.ptr())) {
      handle = py::reinterpret_borrow<py::object>(stream);
    } else if (py::hasattr(stream, "cuda_stream")) {
      handle = stream.attr("cuda_stream");
    } else if (py::hasattr(stream, "ptr")) {
      handle = stream.attr("ptr");
    } else {
      raise_value_error("stream: expected an int handle or an object with .cuda_stream or .ptr, got " +
                        type_name(stream));
    }
  } else {
    TorchHooks& hooks = torch_hooks();
    if (!hooks.find()) return nullptr;
    if (hooks.current_raw_stream != nullptr) {
      handle = py::reinterpret_steal<py::object>(
          PyObject_CallOneArg(hooks.current_raw_stream, py::int_(device.index).ptr()));
    } else {
      handle = py::reinterpret_borrow<py::object>(hooks.current_stream)(device.index).attr("cuda_stream");
    }
    if (!handle) throw py::error_already_set();
  }
  return reinterpret_cast<StreamHandle>(static_cast<uintptr_t>(handle.cast<unsigned long long>()));
}

std::vector<float> host_floats(py::handle values, const char* name) {
  std::vector<float> out;
  if (values.is_none()) return out;
  if (py::hasattr(values, "__dlpack__") || PyCapsule_CheckExact(values.ptr())) {
    Borrowed borrowed;
    const TensorView v = borrowed.view(values, name);
    if (!v.device().is_cpu() || v.dtype() != DType::kF32 || v.rank() != 1) {
      raise_value_error(std::string(name) + " is " + v.describe() + "; expected a 1-D float32 host array");
    }
    for (int64_t i = 0; i < v.size(0); ++i) out.push_back(v.data_as<const float>()[i * v.stride(0)]);
    return out;
  }
  for (py::handle x : values) out.push_back(x.cast<float>());
  return out;
}

}  // namespace pagedattn::python
