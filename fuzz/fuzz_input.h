// The input format shared by the fuzz targets that start from a case: a case file's JSON text,
// optionally followed by a NUL byte and raw bytes that the target turns into edits. The seed corpus
// is cases/*.json as they are (no edits); libFuzzer grows the tail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "testing/case_spec.h"

namespace pagedattn::fuzz {

struct CaseInput {
  std::string json;
  const uint8_t* edits = nullptr;
  size_t num_edits_bytes = 0;
};

inline CaseInput split_case_input(const uint8_t* data, size_t size) {
  const void* nul = std::memchr(data, 0, size);
  const size_t json_size =
      nul ? static_cast<size_t>(static_cast<const uint8_t*>(nul) - data) : size;
  CaseInput in;
  in.json.assign(reinterpret_cast<const char*>(data), json_size);
  if (nul) {
    in.edits = data + json_size + 1;
    in.num_edits_bytes = size - json_size - 1;
  }
  return in;
}

// Reads the edit bytes as little-endian integers, 0 past the end.
class EditReader {
 public:
  EditReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint64_t bits(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i, ++pos_) {
      if (pos_ < size_) v |= uint64_t{data_[pos_]} << (8 * i);
    }
    return v;
  }
  int32_t i32() { return static_cast<int32_t>(bits(4)); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Every refusal says why: an error without a message is a finding.
inline void check_message(const Status& s) {
  if (!s.ok() && s.message().empty()) __builtin_trap();
}

// A parsed case small enough to run many times a second, or nullopt.
inline std::optional<testing::CaseSpec> small_case(const std::string& json) {
  StatusOr<testing::CaseSpec> spec = testing::parse_case_json(json, "fuzz");
  if (!spec.ok()) {
    check_message(spec.status());
    return std::nullopt;
  }
  const StatusOr<int64_t> bytes = spec->host_bytes();
  if (!bytes.ok() || *bytes > (int64_t{8} << 20) || spec->num_tokens() > 512 ||
      spec->num_reqs() > 16) {
    return std::nullopt;
  }
  for (int seq_len : spec->seq_lens) {
    if (seq_len > 4096) return std::nullopt;
  }
  return *spec;
}

}  // namespace pagedattn::fuzz
