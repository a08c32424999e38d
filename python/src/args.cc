#include "args.h"

#include "errors.h"
#include "pagedattn/device_info.h"

namespace pagedattn::python {
namespace {

// "torch.bfloat16" -> "bfloat16"; numpy dtypes and strings print as their names.
std::string name_of(py::handle value) {
  std::string text = py::str(value);
  if (text.rfind("torch.", 0) == 0) text = text.substr(6);
  return text;
}

template <typename T>
T parsed(StatusOr<T>&& result, const char* name) {
  if (!result.ok()) raise_value_error(std::string(name) + ": " + result.status().message());
  return std::move(result).value();
}

}  // namespace

DType dtype_arg(py::handle value, const char* name) { return parsed(parse_dtype(name_of(value)), name); }

KVCacheDType kv_cache_dtype_arg(py::handle value, const char* name) {
  std::string text = name_of(value);
  if (text == "float8_e4m3fn") text = "fp8_e4m3";  // the torch dtype vLLM views FP8 caches as
  if (text == "float8_e5m2") text = "fp8_e5m2";
  return parsed(parse_kv_cache_dtype(text), name);
}

KVCacheLayout layout_arg(py::handle value, const char* name) {
  return parsed(parse_kv_cache_layout(name_of(value)), name);
}

AttentionType attn_type_arg(py::handle value, const char* name) {
  return parsed(parse_attention_type(name_of(value)), name);
}

Device device_arg(py::handle value, const char* name) {
  if (value.is_none()) return default_device();
  const std::string text = name_of(value);
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    try {
      size_t used = 0;
      const int index = std::stoi(text.substr(5), &used);
      if (used == text.size() - 5 && index >= 0) return Device::cuda(index);
    } catch (const std::exception&) {
    }
  }
  raise_value_error(std::string(name) + " = '" + text + "' (allowed: 'cpu', 'cuda', 'cuda:N')");
}

SlidingWindow window_arg(py::handle value, const char* name) {
  if (value.is_none()) return {};
  py::sequence pair = py::reinterpret_borrow<py::sequence>(value);
  if (!py::isinstance<py::sequence>(value) || pair.size() != 2) {
    raise_value_error(std::string(name) + ": expected (left, right) with -1 for unbounded, got " +
                      std::string(py::str(value)));
  }
  return {pair[0].cast<int>(), pair[1].cast<int>()};
}

std::optional<ComputeCapability> compute_capability_arg(py::handle value, const char* name) {
  if (value.is_none()) return std::nullopt;
  if (py::isinstance<py::tuple>(value)) {
    py::tuple t = py::reinterpret_borrow<py::tuple>(value);
    if (t.size() == 2) return ComputeCapability{t[0].cast<int>(), t[1].cast<int>()};
  }
  return parsed(parse_compute_capability(std::string(py::str(value))), name);
}

std::string to_string(const SlidingWindow& window) {
  return "(" + std::to_string(window.left) + ", " + std::to_string(window.right) + ")";
}

}  // namespace pagedattn::python
