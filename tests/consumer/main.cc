// Selects a backend for a sample model on the CPU and prints the KV-cache geometry; exits non-zero
// when anything is off, so the CTest entry fails loudly.
#include <cstdio>

#include "pagedattn/pagedattn.h"

int main() {
  pagedattn::AttentionSelectorConfig config;
  config.head_size = 128;
  config.num_heads = 32;
  config.num_kv_heads = 8;
  config.dtype = pagedattn::DType::kBF16;
  config.device = pagedattn::Device::cpu();
  auto selection = pagedattn::select_backend(config);
  if (!selection.ok()) {
    std::fprintf(stderr, "select_backend failed: %s\n", selection.status().to_string().c_str());
    return 1;
  }
  const pagedattn::AttentionBackend& backend = *selection->backend;
  auto shape = backend.get_kv_cache_shape(64, selection->block_size, config.num_kv_heads,
                                          config.head_size, config.kv_cache_dtype);
  if (!shape.ok()) {
    std::fprintf(stderr, "get_kv_cache_shape failed: %s\n", shape.status().to_string().c_str());
    return 1;
  }
  std::printf("pagedattn %s (CUDA %s): backend %s, block size %d, layout %s\n", PAGEDATTN_VERSION,
              pagedattn::built_with_cuda() ? "on" : "off", std::string(backend.name()).c_str(),
              selection->block_size,
              std::string(pagedattn::kv_cache_layout_name(selection->kv_cache_layout)).c_str());
  std::printf("kv cache shape: (%lld, %lld, %lld, %lld, %lld)\n",
              static_cast<long long>((*shape)[0]), static_cast<long long>((*shape)[1]),
              static_cast<long long>((*shape)[2]), static_cast<long long>((*shape)[3]),
              static_cast<long long>((*shape)[4]));
  return backend.name() == "CPU_ATTN" && (*shape)[2] == selection->block_size ? 0 : 1;
}
