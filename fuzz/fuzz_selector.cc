// libFuzzer target: the selector over a case's model with the input's edit bytes overriding any
// field of AttentionSelectorConfig (sizes to any int, every dtype, devices, capabilities, a forced
// backend name), then the KV-cache geometry of the choice for any block count, and the library's
// name parsers on the forced name. Never crashes; errors carry messages.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "pagedattn/kv_cache.h"
#include "pagedattn/selector.h"

namespace pagedattn::fuzz {
namespace {

template <typename Enum>
Enum pick_enum(EditReader& r, int count) {
  return static_cast<Enum>(r.bits(1) % count);
}

void override_config(EditReader& r, AttentionSelectorConfig& c) {
  const uint64_t which = r.bits(2);
  if (which & 1) c.head_size = r.i32();
  if (which & 2) c.num_heads = r.i32();
  if (which & 4) c.num_kv_heads = r.i32();
  if (which & 8) c.dtype = pick_enum<DType>(r, 8);
  if (which & 16) c.kv_cache_dtype = pick_enum<KVCacheDType>(r, 5);
  if (which & 32) c.block_size = r.bits(1) & 1 ? std::optional<int>(r.i32()) : std::nullopt;
  if (which & 64) {
    const uint64_t flags = r.bits(1);
    c.has_sinks = flags & 1;
    c.use_alibi = flags & 2;
    c.use_sliding_window = flags & 4;
    c.use_soft_cap = flags & 8;
    c.causal = flags & 16;
    c.use_per_head_quant_scales = flags & 32;
  }
  if (which & 128) c.attn_type = pick_enum<AttentionType>(r, 4);
  if (which & 256)
    c.device = r.bits(1) & 1 ? Device::cuda(static_cast<int>(r.bits(1) % 4)) : Device::cpu();
  if (which & 512) {
    c.compute_capability =
        ComputeCapability{static_cast<int>(r.bits(1) % 16), static_cast<int>(r.bits(1) % 10)};
  }
}

}  // namespace
}  // namespace pagedattn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagedattn;
  using namespace pagedattn::fuzz;
  const CaseInput in = split_case_input(data, size);
  StatusOr<testing::CaseSpec> spec = testing::parse_case_json(in.json, "fuzz");
  if (!spec.ok()) return 0;
  AttentionSelectorConfig config = testing::selector_config_for(*spec, Device::cpu());
  EditReader reader(in.edits, in.num_edits_bytes);
  override_config(reader, config);
  const int64_t num_blocks = static_cast<int64_t>(reader.bits(8));
  std::string forced;
  while (!reader.done() && forced.size() < 24) forced += static_cast<char>(reader.bits(1));

  // The name parsers on arbitrary text.
  check_message(parse_dtype(forced).status());
  check_message(parse_kv_cache_dtype(forced).status());
  check_message(parse_kv_cache_layout(forced).status());
  check_message(parse_attention_type(forced).status());
  check_message(parse_compute_capability(forced).status());

  for (const AttentionBackend* backend : registered_backends()) {
    for (const std::string& reason : backend->validate_configuration(config)) {
      if (reason.empty()) __builtin_trap();
    }
  }
  StatusOr<BackendSelection> selection = select_backend(
      config, forced.empty() ? std::nullopt : std::optional<std::string_view>(forced));
  if (!selection.ok()) {
    check_message(selection.status());
    return 0;
  }
  const BackendSelection& s = *selection;
  check_message(s.backend
                    ->get_kv_cache_shape(num_blocks, s.block_size, config.num_kv_heads,
                                         config.head_size, config.kv_cache_dtype)
                    .status());
  const DType storage = kv_cache_storage_dtype(config.kv_cache_dtype, config.dtype);
  check_message(
      kv_cache_bytes_per_block(s.block_size, config.num_kv_heads, config.head_size, storage)
          .status());
  (void)s.backend->get_kv_cache_stride_order(s.kv_cache_layout);
  return 0;
}
