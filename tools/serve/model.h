// The attention shape of a model as the serve loop needs it (no weights): layers, heads, head size,
// dtypes, block size and, per layer, a sliding window and attention sinks. Presets give a few
// well-known open models' shapes plus a tiny default that runs quickly on a CPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pagedattn/attention_layer.h"
#include "pagedattn/backend.h"
#include "pagedattn/status.h"
#include "pagedattn/types.h"

namespace pagedattn::serve {

// Layers that share one KV-cache spec and so one metadata builder (vLLM's KV-cache group).
struct LayerGroup {
  SlidingWindow window;  // (-1, -1) = full attention
  std::vector<int> layers;
};

struct ModelShape {
  std::string name = "tiny";
  int num_layers = 4;
  int num_heads = 8;
  int num_kv_heads = 2;
  int head_size = 128;
  DType dtype = DType::kBF16;
  KVCacheDType kv_cache_dtype = KVCacheDType::kAuto;
  int block_size = 16;
  int max_model_len = 4096;
  bool sinks = false;      // learned per-head sink logits (gpt-oss)
  int sliding_window = 0;  // keys a windowed layer sees, 0 = none
  int window_every = 1;    // layers l with l % window_every == 0 are windowed (gpt-oss: 2)

  // The layers grouped by their window: one group, or full and windowed groups.
  std::vector<LayerGroup> layer_groups() const;
  std::string describe() const;  // "llama3-8b: 32 layers, 32/8 heads, head 128, bf16, cache auto"
};

// The attention layer of one layer group (`window`), in a cache of `layout` on `device`; sink logits,
// where the model has them, drawn from `seed`.
AttentionLayer attention_layer_of(const ModelShape& model, const SlidingWindow& window,
                                  KVCacheLayout layout, const Device& device, uint64_t seed);

// The selector's question for this model on `device` (its windowed layers' window, if any).
AttentionSelectorConfig selector_config_for(const ModelShape& model, const Device& device);

// Preset names, in the order --help lists them.
std::vector<std::string> model_preset_names();
// A preset by name ("tiny", "llama3-8b", "qwen2.5-7b", "mistral-7b", "gpt-oss-20b"); NotFound
// lists the known names.
StatusOr<ModelShape> model_preset(const std::string& name);

}  // namespace pagedattn::serve
