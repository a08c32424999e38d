// libFuzzer target: any bytes as a case file. Never crashes; every refusal is one message of
// bounded length; an accepted case survives a round trip through case_to_json unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "testing/case_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagedattn::testing;
  const std::string text(reinterpret_cast<const char*>(data), size);
  pagedattn::StatusOr<CaseSpec> spec = parse_case_json(text, "fuzz");
  if (!spec.ok()) {
    // Values echoed in messages are clipped: a message never grows with the input.
    const size_t length = spec.status().message().size();
    if (length == 0 || length > 2048) __builtin_trap();
    return 0;
  }
  const std::string resolved = case_to_json(*spec);
  pagedattn::StatusOr<CaseSpec> again = parse_case_json(resolved, "other");
  if (!again.ok() || case_to_json(*again) != resolved) __builtin_trap();
  return 0;
}
