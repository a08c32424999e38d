// NumPy .npy format 1.0: "\x93NUMPY", version 1.0, a little-endian uint16 header length, then a
// Python dict literal padded with spaces and ended by '\n' so that the data starts at a multiple
// of 64.
#include "testing/npy.h"

#include <bit>
#include <fstream>

namespace pagedattn::testing {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the .npy writer stores raw memory and declares it little-endian");

Status write_file(const std::string& path, const std::string& header, const void* data,
                  int64_t nbytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return not_found("cannot open '" + path + "' for writing");
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(nbytes));
  if (!out) return internal_error("failed writing '" + path + "'");
  return ok_status();
}

}  // namespace

std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t s : shape) dims += std::to_string(s) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // "(3,)" for rank 1, "(2, 3)" otherwise
  if (shape.size() == 1) dims.resize(dims.size() - 1);
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t preamble = 10;  // magic (6) + version (2) + header length (2)
  const size_t total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - preamble - dict.size() - 1, ' ');
  dict += '\n';
  std::string header = "\x93NUMPY";
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>((dict.size() >> 8) & 0xff);
  return header + dict;
}

Status write_npy(const std::string& path, const TensorView& view) {
  if (!view.device().is_cpu() || !view.is_contiguous()) {
    return invalid_argument("write_npy: '" + path + "' needs a contiguous host tensor, got " +
                            view.describe());
  }
  const char* descr = nullptr;
  switch (view.dtype()) {
    case DType::kF32: descr = "<f4"; break;
    case DType::kI32: descr = "<i4"; break;
    case DType::kI64: descr = "<i8"; break;
    case DType::kU8: descr = "|u1"; break;
    default:
      return invalid_argument("write_npy: dtype " + std::string(dtype_name(view.dtype())) +
                              " is not written; allowed: f32, i32, i64, u8");
  }
  std::vector<int64_t> shape(view.shape().begin(), view.shape().end());
  return write_file(path, npy_header(descr, shape), view.data(), view.nbytes());
}

Status write_npy_f32(const std::string& path, const std::vector<int64_t>& shape,
                     const std::vector<float>& values) {
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  if (numel != static_cast<int64_t>(values.size())) {
    return invalid_argument("write_npy_f32: '" + path + "' has " + std::to_string(values.size()) +
                            " values for a shape of " + std::to_string(numel) + " elements");
  }
  return write_file(path, npy_header("<f4", shape), values.data(),
                    numel * static_cast<int64_t>(sizeof(float)));
}

}  // namespace pagedattn::testing
