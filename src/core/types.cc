// Names and parsers for the small enums of types.h.
#include "pagedattn/types.h"

#include <array>
#include <cctype>
#include <charconv>
#include <utility>

namespace pagedattn {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

template <typename E, size_t N>
StatusOr<E> parse_from(std::string_view what, std::string_view text,
                       const std::array<std::pair<std::string_view, E>, N>& names,
                       std::string_view allowed) {
  const std::string key = lower(text);
  for (const auto& [name, value] : names) {
    if (key == name) return value;
  }
  return not_found(std::string(what) + " '" + std::string(text) +
                   "' is unknown; allowed: " + std::string(allowed));
}

constexpr std::array<std::pair<std::string_view, DType>, 22> kDTypeNames{{
    {"f32", DType::kF32},
    {"float32", DType::kF32},
    {"float", DType::kF32},
    {"fp32", DType::kF32},
    {"f16", DType::kF16},
    {"float16", DType::kF16},
    {"half", DType::kF16},
    {"fp16", DType::kF16},
    {"bf16", DType::kBF16},
    {"bfloat16", DType::kBF16},
    {"fp8_e4m3", DType::kFP8E4M3},
    {"float8_e4m3fn", DType::kFP8E4M3},
    {"e4m3", DType::kFP8E4M3},
    {"fp8_e5m2", DType::kFP8E5M2},
    {"float8_e5m2", DType::kFP8E5M2},
    {"e5m2", DType::kFP8E5M2},
    {"u8", DType::kU8},
    {"uint8", DType::kU8},
    {"i32", DType::kI32},
    {"int32", DType::kI32},
    {"i64", DType::kI64},
    {"int64", DType::kI64},
}};

constexpr std::array<std::pair<std::string_view, KVCacheDType>, 6> kKVCacheDTypeNames{{
    {"auto", KVCacheDType::kAuto},
    {"float16", KVCacheDType::kFloat16},
    {"bfloat16", KVCacheDType::kBFloat16},
    {"fp8", KVCacheDType::kFP8E4M3},
    {"fp8_e4m3", KVCacheDType::kFP8E4M3},
    {"fp8_e5m2", KVCacheDType::kFP8E5M2},
}};

constexpr std::array<std::pair<std::string_view, KVCacheLayout>, 2> kLayoutNames{{
    {"nhd", KVCacheLayout::kNHD},
    {"hnd", KVCacheLayout::kHND},
}};

constexpr std::array<std::pair<std::string_view, AttentionType>, 4> kAttentionTypeNames{{
    {"decoder", AttentionType::kDecoder},
    {"encoder", AttentionType::kEncoder},
    {"encoder_only", AttentionType::kEncoderOnly},
    {"encoder_decoder", AttentionType::kEncoderDecoder},
}};

}  // namespace

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kFP8E4M3: return 1;
    case DType::kFP8E5M2: return 1;
    case DType::kU8: return 1;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kFP8E4M3: return "fp8_e4m3";
    case DType::kFP8E5M2: return "fp8_e5m2";
    case DType::kU8: return "u8";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
  }
  return "unknown";
}

StatusOr<DType> parse_dtype(std::string_view name) {
  return parse_from<DType>(
      "dtype", name, kDTypeNames,
      "f32 (float32), f16 (float16, half), bf16 (bfloat16), fp8_e4m3, fp8_e5m2, "
      "u8, i32, i64");
}

bool is_floating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 || is_fp8(dtype);
}

bool is_fp8(DType dtype) {
  return dtype == DType::kFP8E4M3 || dtype == DType::kFP8E5M2;
}

std::string_view kv_cache_dtype_name(KVCacheDType kv) {
  switch (kv) {
    case KVCacheDType::kAuto: return "auto";
    case KVCacheDType::kFloat16: return "float16";
    case KVCacheDType::kBFloat16: return "bfloat16";
    case KVCacheDType::kFP8E4M3: return "fp8_e4m3";
    case KVCacheDType::kFP8E5M2: return "fp8_e5m2";
  }
  return "unknown";
}

StatusOr<KVCacheDType> parse_kv_cache_dtype(std::string_view name) {
  return parse_from<KVCacheDType>("kv_cache_dtype", name, kKVCacheDTypeNames,
                                  "auto, float16, bfloat16, fp8, fp8_e4m3, fp8_e5m2");
}

DType kv_cache_storage_dtype(KVCacheDType kv, DType model_dtype) {
  switch (kv) {
    case KVCacheDType::kAuto: return model_dtype;
    case KVCacheDType::kFloat16: return DType::kF16;
    case KVCacheDType::kBFloat16: return DType::kBF16;
    case KVCacheDType::kFP8E4M3: return DType::kFP8E4M3;
    case KVCacheDType::kFP8E5M2: return DType::kFP8E5M2;
  }
  return model_dtype;
}

std::string device_name(const Device& device) {
  if (device.is_cpu()) return "cpu";
  return "cuda:" + std::to_string(device.index);
}

std::string compute_capability_name(ComputeCapability cc) {
  return std::to_string(cc.major) + "." + std::to_string(cc.minor);
}

StatusOr<ComputeCapability> parse_compute_capability(std::string_view text) {
  const auto bad = [&] {
    return invalid_argument("compute capability '" + std::string(text.substr(0, 40)) +
                            "' is malformed; expected MAJOR.MINOR (MAJOR in [1, 99], MINOR in "
                            "[0, 9]) such as 8.0, 8.6 or 9.0");
  };
  const size_t dot = text.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 >= text.size()) return bad();
  ComputeCapability cc;
  const std::string_view major = text.substr(0, dot);
  const std::string_view minor = text.substr(dot + 1);
  auto r1 = std::from_chars(major.data(), major.data() + major.size(), cc.major);
  auto r2 = std::from_chars(minor.data(), minor.data() + minor.size(), cc.minor);
  if (r1.ec != std::errc() || r1.ptr != major.data() + major.size() || r2.ec != std::errc() ||
      r2.ptr != minor.data() + minor.size() || cc.major < 1 || cc.major > 99 || cc.minor < 0 ||
      cc.minor > 9) {  // as_int() = 10 * major + minor must not overflow
    return bad();
  }
  return cc;
}

std::string_view kv_cache_layout_name(KVCacheLayout layout) {
  return layout == KVCacheLayout::kNHD ? "NHD" : "HND";
}

StatusOr<KVCacheLayout> parse_kv_cache_layout(std::string_view name) {
  return parse_from<KVCacheLayout>("kv_cache_layout", name, kLayoutNames, "NHD, HND");
}

std::string_view attention_type_name(AttentionType type) {
  switch (type) {
    case AttentionType::kDecoder: return "decoder";
    case AttentionType::kEncoder: return "encoder";
    case AttentionType::kEncoderOnly: return "encoder_only";
    case AttentionType::kEncoderDecoder: return "encoder_decoder";
  }
  return "unknown";
}

StatusOr<AttentionType> parse_attention_type(std::string_view name) {
  return parse_from<AttentionType>("attention type", name, kAttentionTypeNames,
                                   "decoder, encoder, encoder_only, encoder_decoder");
}

}  // namespace pagedattn
