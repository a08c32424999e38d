#include "backends/layer_spec.h"

#include <string>

namespace pagedattn::backends {
namespace {

Status differs(std::string_view field, const std::string& builder, const std::string& layer) {
  return invalid_argument("metadata was built for " + std::string(field) + " = " + builder +
                          " (BuilderParams); this layer has " + std::string(field) + " = " + layer +
                          " (AttentionImplParams)");
}

std::string window_text(const SlidingWindow& w) {
  std::string text = "(";  // appended, not "(" + ...: g++ 12 warns falsely on that (-Wrestrict)
  text += std::to_string(w.left) + ", " + std::to_string(w.right) + ")";
  return text;
}

}  // namespace

LayerSpec layer_spec(const BuilderParams& params) {
  return {params.num_heads,      params.num_kv_heads, params.head_size, params.dtype,
          params.kv_cache_dtype, params.use_alibi,    params.sliding_window};
}

Status check_layer_spec(const LayerSpec& builder, const AttentionImplParams& layer) {
  const auto str = [](int v) { return std::to_string(v); };
  if (builder.num_heads != layer.num_heads) {
    return differs("num_heads", str(builder.num_heads), str(layer.num_heads));
  }
  if (builder.num_kv_heads != layer.num_kv_heads) {
    return differs("num_kv_heads", str(builder.num_kv_heads), str(layer.num_kv_heads));
  }
  if (builder.head_size != layer.head_size) {
    return differs("head_size", str(builder.head_size), str(layer.head_size));
  }
  if (builder.dtype != layer.dtype) {
    return differs("dtype", std::string(dtype_name(builder.dtype)),
                   std::string(dtype_name(layer.dtype)));
  }
  if (kv_cache_storage_dtype(builder.kv_cache_dtype, builder.dtype) !=
      kv_cache_storage_dtype(layer.kv_cache_dtype, layer.dtype)) {
    return differs("kv_cache_dtype", std::string(kv_cache_dtype_name(builder.kv_cache_dtype)),
                   std::string(kv_cache_dtype_name(layer.kv_cache_dtype)));
  }
  if (builder.use_alibi != !layer.alibi_slopes.empty()) {
    return invalid_argument(
        "metadata was built for use_alibi = " + std::string(builder.use_alibi ? "true" : "false") +
        " (BuilderParams); this layer has " +
        (layer.alibi_slopes.empty() ? "no alibi_slopes" : "alibi_slopes") +
        " (AttentionImplParams)");
  }
  if (builder.sliding_window != layer.sliding_window) {
    return differs("sliding_window", window_text(builder.sliding_window),
                   window_text(layer.sliding_window));
  }
  return ok_status();
}

}  // namespace pagedattn::backends
