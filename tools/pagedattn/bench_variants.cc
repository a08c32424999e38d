#include "bench_variants.h"

#include <new>

#include "common.h"
#include "pagedattn/selector.h"
#include "testing/batch_params.h"

namespace pagedattn::cli {

std::string generation_name(int kernel_generation) {
  return kernel_generation == 2 ? "v2" : kernel_generation == 3 ? "v3" : "auto";
}

StatusOr<std::vector<BenchVariant>> parse_variants(const std::string& text,
                                                   int default_generation) {
  std::vector<BenchVariant> out;
  const CLI::Validator backend_check = backend_validator(true);
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string entry = text.substr(start, comma - start);
    start = comma + 1;
    const size_t colon = entry.find(':');
    std::string name = entry.substr(0, colon);
    BenchVariant variant{name, default_generation};
    if (colon != std::string::npos) {
      const std::string gen = entry.substr(colon + 1);
      if (gen != "auto" && gen != "v2" && gen != "v3") {
        return invalid_argument("'" + testing::clip_for_message(entry, 40) +
                                "': unknown kernel generation '" +
                                testing::clip_for_message(gen, 40) + "'; allowed: auto, v2, v3");
      }
      variant.kernel_generation = gen == "v2" ? 2 : gen == "v3" ? 3 : 0;
    }
    if (std::string error = backend_check(name); !error.empty()) {
      return invalid_argument(entry.empty()
                                  ? "an empty entry in '" + testing::clip_for_message(text, 80) +
                                        "' (write BACKEND[:GEN],BACKEND[:GEN],...)"
                                  : error);
    }
    out.push_back(variant);
  }
  return out;
}

CLI::Validator variants_validator() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        StatusOr<std::vector<BenchVariant>> parsed = parse_variants(value, 0);
        return parsed.ok() ? std::string() : parsed.status().message();
      },
      "", "BACKEND[:GEN],...");
}

StatusOr<Device> variants_device(const std::vector<BenchVariant>& variants) {
  const Device device = device_for_backend(variants.front().backend);
  for (const BenchVariant& v : variants) {
    if (device_for_backend(v.backend) != device) {
      return invalid_argument("'" + variants.front().backend + "' runs on " + device_name(device) +
                              " but '" + v.backend + "' on " +
                              device_name(device_for_backend(v.backend)) +
                              ": one bench run times one device");
    }
  }
  return device;
}

StatusOr<std::unique_ptr<testing::StepRunner>> SharedCase::runner(const BenchVariant& variant) {
  PAGEDATTN_RETURN_IF_ERROR(spec_.validate());
  PAGEDATTN_ASSIGN_OR_RETURN(
      BackendSelection selection,
      select_backend(selector_config_for(spec_, device_), forced_backend(variant.backend)));
  const KVCacheLayout layout = selection.kv_cache_layout;
  testing::HostBatch* batch = nullptr;
  for (const std::unique_ptr<testing::HostBatch>& b : batches_) {
    if (b->layout == layout) batch = b.get();
  }
  if (batch == nullptr) {
    testing::CaseSpec spec = spec_;
    spec.kv_layout = layout;
    try {
      PAGEDATTN_ASSIGN_OR_RETURN(testing::HostBatch made, testing::make_host_batch(spec, layout));
      batches_.push_back(std::make_unique<testing::HostBatch>(std::move(made)));
    } catch (const std::bad_alloc&) {
      return out_of_range("out of host memory making the batch of '" + spec_.name + "'");
    }
    batch = batches_.back().get();
  }
  testing::StepOptions options;
  options.kernel_generation = variant.kernel_generation;
  options.fp8_tensor_cores = fp8_tensor_cores_;
  if (deterministic_) {
    options.builder_params = testing::builder_params_for(batch->spec, device_);
    options.builder_params->deterministic = true;
  }
  return testing::StepRunner::for_batch(*batch, *selection.backend, device_, options);
}

}  // namespace pagedattn::cli
