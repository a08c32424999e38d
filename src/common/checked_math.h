// Overflow-checked int64 arithmetic for sizes computed from user input (shapes, byte counts, slot
// counts): each returns nullopt instead of wrapping, so the caller can name the values in an error.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

namespace pagedattn {

inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of every factor, or nullopt when an intermediate product overflows.
inline std::optional<int64_t> checked_product(std::initializer_list<int64_t> factors) {
  int64_t out = 1;
  for (int64_t f : factors) {
    if (__builtin_mul_overflow(out, f, &out)) return std::nullopt;
  }
  return out;
}

}  // namespace pagedattn
