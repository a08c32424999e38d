// Model presets: the attention shapes of each model's published config.
#include "serve/model.h"

#include <cstdio>
#include <random>

namespace pagedattn::serve {
namespace {

ModelShape shape(const char* name, int layers, int heads, int kv_heads, int head_size,
                 int max_model_len) {
  ModelShape m;
  m.name = name;
  m.num_layers = layers;
  m.num_heads = heads;
  m.num_kv_heads = kv_heads;
  m.head_size = head_size;
  m.max_model_len = max_model_len;
  return m;
}

std::vector<ModelShape> presets() {
  std::vector<ModelShape> all;
  all.push_back(shape("tiny", 4, 8, 2, 128, 4096));  // small enough for a 2-core CPU in seconds
  all.push_back(shape("llama3-8b", 32, 32, 8, 128, 8192));
  all.push_back(shape("qwen2.5-7b", 28, 28, 4, 128, 8192));
  ModelShape mistral = shape("mistral-7b", 32, 32, 8, 128, 8192);
  mistral.sliding_window = 4096;  // Mistral-7B-v0.1's window on every layer
  all.push_back(mistral);
  ModelShape oss = shape("gpt-oss-20b", 24, 64, 8, 64, 8192);
  oss.sinks = true;
  oss.sliding_window = 128;  // alternating windowed and full layers, every layer with sinks
  oss.window_every = 2;
  all.push_back(oss);
  return all;
}

}  // namespace

std::vector<LayerGroup> ModelShape::layer_groups() const {
  LayerGroup full, windowed;
  windowed.window = SlidingWindow{sliding_window - 1, 0};
  for (int l = 0; l < num_layers; ++l) {
    const bool in_window = sliding_window > 0 && l % window_every == 0;
    (in_window ? windowed : full).layers.push_back(l);
  }
  std::vector<LayerGroup> groups;
  if (!full.layers.empty()) groups.push_back(full);
  if (!windowed.layers.empty()) groups.push_back(windowed);
  return groups;
}

std::string ModelShape::describe() const {
  char text[256];
  std::snprintf(text, sizeof(text), "%s: %d layers, %d/%d heads, head %d, %s, cache %s, block %d",
                name.c_str(), num_layers, num_heads, num_kv_heads, head_size,
                std::string(dtype_name(dtype)).c_str(),
                std::string(kv_cache_dtype_name(kv_cache_dtype)).c_str(), block_size);
  std::string out = text;
  if (sliding_window > 0) {
    out += ", window " + std::to_string(sliding_window);
    if (window_every > 1) out += " every " + std::to_string(window_every) + " layers";
  }
  if (sinks) out += ", sinks";
  return out;
}

AttentionLayer attention_layer_of(const ModelShape& m, const SlidingWindow& window,
                                  KVCacheLayout layout, const Device& device, uint64_t seed) {
  AttentionLayer layer;
  layer.num_heads = m.num_heads;
  layer.num_kv_heads = m.num_kv_heads;
  layer.head_size = m.head_size;
  layer.block_size = m.block_size;
  layer.dtype = m.dtype;
  layer.kv_cache_dtype = m.kv_cache_dtype;
  layer.kv_layout = layout;
  layer.sliding_window = window;
  std::mt19937_64 sink_rng(seed ^ 0x51A4ull);
  for (int h = 0; m.sinks && h < m.num_heads; ++h) {
    layer.sinks.push_back(static_cast<float>(static_cast<int>(sink_rng() % 4001) - 2000) / 1000.0f);
  }
  layer.device = device;
  return layer;
}

AttentionSelectorConfig selector_config_for(const ModelShape& m, const Device& device) {
  const SlidingWindow window = m.layer_groups().back().window;  // the windowed group comes last
  return selector_config(attention_layer_of(m, window, KVCacheLayout::kNHD, device, 0));
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const ModelShape& m : presets()) names.push_back(m.name);
  return names;
}

StatusOr<ModelShape> model_preset(const std::string& name) {
  std::string known;
  for (const ModelShape& m : presets()) {
    if (m.name == name) return m;
    known += (known.empty() ? "" : ", ") + m.name;
  }
  return not_found("unknown model preset '" + name + "'; known: " + known);
}

}  // namespace pagedattn::serve
