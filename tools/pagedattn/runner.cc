#include "runner.h"

#include <new>

#include "common.h"
#include "pagedattn/selector.h"

namespace pagedattn::cli {

StatusOr<std::unique_ptr<StepRunner>> prepare_case(const testing::CaseSpec& spec,
                                                   const std::string& backend_name,
                                                   const testing::StepOptions& options) {
  PAGEDATTN_RETURN_IF_ERROR(spec.validate());
  const Device device = device_for_backend(backend_name);
  PAGEDATTN_ASSIGN_OR_RETURN(
      BackendSelection selection,
      select_backend(selector_config_for(spec, device), forced_backend(backend_name)));
  const AttentionBackend& backend = *selection.backend;
  const KVCacheLayout layout = spec.kv_layout.value_or(selection.kv_cache_layout);
  if (auto required = backend.required_kv_cache_layout(); required && *required != layout) {
    return invalid_argument("kv_layout = " + std::string(kv_cache_layout_name(layout)) + ": " +
                            std::string(backend.name()) + " requires " +
                            std::string(kv_cache_layout_name(*required)));
  }
  try {
    return StepRunner::prepare(spec, backend, device, layout, options);
  } catch (const std::bad_alloc&) {  // validate() caps the size; the machine may still have less
    const StatusOr<int64_t> bytes = spec.host_bytes();
    return out_of_range("out of host memory preparing the case (it needs about " +
                        (bytes.ok() ? std::to_string(*bytes >> 20) : std::string("?")) + " MiB)");
  }
}

}  // namespace pagedattn::cli
