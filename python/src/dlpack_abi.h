// The DLPack exchange structs (ABI version 0.x "dltensor" capsules), written out here so that the
// bindings need no framework header. Field order and widths are the ABI; names follow the spec.
#pragma once

#include <cstdint>

namespace pagedattn::python::dlpack {

// DLDeviceType values this library can view.
enum DeviceType : int32_t { kCPU = 1, kCUDA = 2, kCUDAHost = 3, kCUDAManaged = 13 };

// DLDataTypeCode values this library can view.
enum TypeCode : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kBfloat = 4, kFloat8E4M3FN = 10, kFloat8E5M2 = 12 };

struct Device {
  int32_t device_type;
  int32_t device_id;
};

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // elements; null means compact row-major
  uint64_t byte_offset;
};

struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

// Capsule names: a producer hands out kCapsuleName; a consumer that took ownership renames it so
// the capsule's destructor leaves the tensor alone.
inline constexpr const char* kCapsuleName = "dltensor";
inline constexpr const char* kUsedCapsuleName = "used_dltensor";

}  // namespace pagedattn::python::dlpack
