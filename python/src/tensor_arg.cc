#include "tensor_arg.h"

#include <array>
#include <cstring>
#include <string>

#include "errors.h"

namespace pagedattn::python {
namespace {

std::string type_name(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__name__")); }

// PyTorch, looked up once the caller has imported it (this module never imports it). Its tensors
// are viewed through their own attributes (data_ptr, shape, stride, dtype, device): the view
// DLPack would give, without building and releasing a capsule (about 1 us less per tensor, which
// is most of a decode call's overhead). Everything else goes through DLPack.
struct TorchHooks {
  PyObject* tensor_type = nullptr;
  PyObject* current_raw_stream = nullptr;  // torch._C._cuda_getCurrentRawStream, when present
  PyObject* current_stream = nullptr;      // torch.cuda.current_stream (older PyTorch)
  std::vector<std::pair<PyObject*, DType>> dtypes;
  PyObject *data_ptr, *shape, *stride, *dtype, *is_cuda, *is_cpu, *get_device, *requires_grad;
  bool ready = false;

  bool find() {
    if (ready) return true;
    PyObject* modules = PyImport_GetModuleDict();
    PyObject* torch = PyDict_GetItemString(modules, "torch");
    if (torch == nullptr) return false;
    // Everything here is held for the life of the process (PyTorch is never unloaded).
    py::module_ t = py::reinterpret_borrow<py::module_>(torch);
    py::object c = t.attr("_C");
    tensor_type = py::object(t.attr("Tensor")).release().ptr();
    if (py::hasattr(c, "_cuda_getCurrentRawStream")) {
      current_raw_stream = py::object(c.attr("_cuda_getCurrentRawStream")).release().ptr();
    } else {
      current_stream = py::object(t.attr("cuda").attr("current_stream")).release().ptr();
    }
    const std::pair<const char*, DType> names[] = {
        {"float32", DType::kF32}, {"float16", DType::kF16}, {"bfloat16", DType::kBF16},
        {"float8_e4m3fn", DType::kFP8E4M3}, {"float8_e5m2", DType::kFP8E5M2}, {"uint8", DType::kU8},
        {"int32", DType::kI32}, {"int64", DType::kI64}};
    for (const auto& [dtype_name, dtype] : names) {
      if (py::hasattr(t, dtype_name)) dtypes.emplace_back(py::object(t.attr(dtype_name)).release().ptr(), dtype);
    }
    for (auto [slot, attr] : {std::pair{&data_ptr, "data_ptr"}, {&shape, "shape"}, {&stride, "stride"},
                              {&dtype, "dtype"}, {&is_cuda, "is_cuda"}, {&is_cpu, "is_cpu"},
                              {&get_device, "get_device"}, {&requires_grad, "requires_grad"}}) {
      *slot = PyUnicode_InternFromString(attr);
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

py::object attr(py::handle obj, PyObject* name) {
  PyObject* value = PyObject_GetAttr(obj.ptr(), name);
  if (value == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(value);
}

py::object call(py::handle obj, PyObject* method) {
  PyObject* value = PyObject_CallMethodNoArgs(obj.ptr(), method);
  if (value == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(value);
}

TensorView torch_view(py::handle tensor, const char* name) {
  const TorchHooks& h = torch_hooks();
  // As torch.Tensor.__dlpack__ does: a view would let writes bypass autograd.
  if (attr(tensor, h.requires_grad).ptr() == Py_True) {
    raise_value_error(std::string(name) + ": the tensor requires grad; pass tensor.detach()");
  }
  const py::object dtype_obj = attr(tensor, h.dtype);
  std::optional<DType> dtype;
  for (const auto& [obj, d] : h.dtypes) {
    if (obj == dtype_obj.ptr()) dtype = d;
  }
  if (!dtype) {
    raise_value_error(std::string(name) + ": dtype " + std::string(py::str(dtype_obj)) +
                      " is not supported (allowed: float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, "
                      "uint8, int32, int64)");
  }
  Device device;
  if (attr(tensor, h.is_cuda).ptr() == Py_True) {
    device = Device::cuda(call(tensor, h.get_device).cast<int>());
  } else if (attr(tensor, h.is_cpu).ptr() != Py_True) {
    raise_value_error(std::string(name) + ": device " + std::string(py::str(tensor.attr("device"))) +
                      " is not supported (allowed: cpu, cuda)");
  }
  const py::object shape = attr(tensor, h.shape), strides = call(tensor, h.stride);
  const Py_ssize_t rank = PyTuple_GET_SIZE(shape.ptr());
  if (rank > TensorView::kMaxRank) {
    raise_value_error(std::string(name) + ": rank " + std::to_string(rank) + " is not supported (at most " +
                      std::to_string(TensorView::kMaxRank) + ")");
  }
  std::array<int64_t, TensorView::kMaxRank> dims{}, steps{};
  for (Py_ssize_t d = 0; d < rank; ++d) {
    dims[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape.ptr(), d));
    steps[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides.ptr(), d));
  }
  void* data = PyLong_AsVoidPtr(call(tensor, h.data_ptr).ptr());
  const auto n = static_cast<size_t>(rank);
  return TensorView(data, *dtype, device, std::span<const int64_t>(dims.data(), n),
                    std::span<const int64_t>(steps.data(), n));
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

TensorView to_view(const dlpack::Tensor& t, const char* name) {
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
  return TensorView(data, *dtype, device, std::span<const int64_t>(t.shape, rank),
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
  if (is_torch_tensor(array)) return torch_view(array, name);
  py::object capsule = PyCapsule_CheckExact(array.ptr()) ? py::reinterpret_borrow<py::object>(array)
                                                         : producer_capsule(array, name, stream);
  if (!PyCapsule_IsValid(capsule.ptr(), dlpack::kCapsuleName)) {
    raise_value_error(std::string(name) + ": expected a fresh \"dltensor\" capsule (one not yet consumed)");
  }
  auto* managed = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), dlpack::kCapsuleName));
  // Ours now: the capsule's destructor must not release it too.
  PyCapsule_SetName(capsule.ptr(), dlpack::kUsedCapsuleName);
  held_.push_back(managed);
  return to_view(managed->dl_tensor, name);
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
