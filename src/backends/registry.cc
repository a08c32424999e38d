// The backend registry: every backend this library knows, built or not.
#include <array>
#include <cctype>

#include "backends/factories.h"
#include "pagedattn/backend.h"

namespace pagedattn {
namespace {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::span<const AttentionBackend* const> registered_backends() {
  static const std::array<const AttentionBackend*, 3> backends = {
      &flash_attn_backend(), &flashinfer_backend(), &cpu_attn_backend()};
  return backends;
}

const AttentionBackend* find_backend(std::string_view name) {
  // "cpu" is the short alias of CPU_ATTN; the others' aliases are their names in lower case.
  if (equals_ignoring_case(name, "cpu")) return &cpu_attn_backend();
  for (const AttentionBackend* backend : registered_backends()) {
    if (equals_ignoring_case(name, backend->name())) return backend;
  }
  return nullptr;
}

}  // namespace pagedattn
