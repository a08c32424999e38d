// Shared helpers of the command-line tool.
#include "common.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "pagedattn/backend.h"
#include "pagedattn/device_info.h"

namespace pagedattn::cli {
namespace {

// Wraps a library parser: an empty string means the value is accepted.
template <typename Parse>
CLI::Validator parsed_by(Parse parse, const std::string& name) {
  return CLI::Validator(
      [parse](std::string& value) -> std::string {
        auto parsed = parse(value);
        return parsed.ok() ? std::string() : parsed.status().message();
      },
      "", name);
}

}  // namespace

int bad_input(const std::string& message) {
  std::cerr << "pagedattn: error: " << message << "\n";
  return kExitBadInput;
}

int bad_input(const Status& status) {
  return bad_input(status.message());
}

CLI::Validator dtype_validator() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        auto dtype = parse_dtype(value);
        if (dtype.ok() && is_floating(*dtype) && !is_fp8(*dtype)) return {};
        return "unknown model dtype '" + value + "'; allowed: f32, f16, bf16 (or float32, " +
               "float16, half, bfloat16)";
      },
      "", "DTYPE");
}

CLI::Validator kv_cache_dtype_validator() {
  return parsed_by([](const std::string& v) { return parse_kv_cache_dtype(v); }, "KV_CACHE_DTYPE");
}
CLI::Validator layout_validator() {
  return parsed_by([](const std::string& v) { return parse_kv_cache_layout(v); }, "LAYOUT");
}
CLI::Validator attn_type_validator() {
  return parsed_by([](const std::string& v) { return parse_attention_type(v); }, "ATTN_TYPE");
}
CLI::Validator compute_capability_validator() {
  return parsed_by([](const std::string& v) { return parse_compute_capability(v); }, "X.Y");
}

CLI::Validator backend_validator(bool allow_auto) {
  return CLI::Validator(
      [allow_auto](std::string& value) -> std::string {
        if ((allow_auto && value == "auto") || find_backend(value) != nullptr) return {};
        std::string known = allow_auto ? "auto" : "";
        for (const AttentionBackend* backend : registered_backends()) {
          if (!known.empty()) known += ", ";
          known += std::string(backend->name());
        }
        return "unknown backend '" + value + "'; allowed: " + known +
               " (or lower case: cpu, flash_attn, flashinfer)";
      },
      "", "BACKEND");
}

CLI::Validator integer_in_range(int64_t min_value, int64_t max_value) {
  const std::string range =
      "[" + std::to_string(min_value) + ", " + std::to_string(max_value) + "]";
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        int64_t x = 0;
        const char* end = value.data() + value.size();
        const auto [ptr, error] = std::from_chars(value.data(), end, x);
        if (error == std::errc() && ptr == end && x >= min_value && x <= max_value) return {};
        return "'" + testing::clip_for_message(value, 40) + "' is not an integer in " + range;
      },
      "INT in " + range, "INT");
}

CLI::Validator finite_above(double min_value) {
  const std::string allowed = "a finite number > " + CLI::detail::to_string(min_value);
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(value.c_str(), &end);
        if (!value.empty() && end == value.c_str() + value.size() && std::isfinite(x) &&
            x > min_value) {
          return {};
        }
        return "'" + testing::clip_for_message(value, 40) + "' is not " + allowed;
      },
      "NUMBER > " + CLI::detail::to_string(min_value), "NUMBER");
}

CLI::Validator non_empty(const std::string& what) {
  return CLI::Validator(
      [what](std::string& value) -> std::string {
        return value.empty() ? "an empty " + what + " is not allowed" : std::string();
      },
      "", "NON_EMPTY");
}

Device device_for_backend(const std::string& backend) {
  if (backend == "auto") return default_device();
  const AttentionBackend* found = find_backend(backend);
  if (found != nullptr && found->supports_device(DeviceKind::kCPU)) return Device::cpu();
  return Device::cuda(0);
}

std::optional<std::string> forced_backend(const std::string& backend) {
  if (backend == "auto") return std::nullopt;
  return backend;
}

std::string format_shape(std::span<const int64_t> shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + ")";
}

std::string format_order(std::span<const int> order) {
  std::string out = "(";
  for (size_t i = 0; i < order.size(); ++i) out += (i ? ", " : "") + std::to_string(order[i]);
  return out + ")";
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof(text), u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return text;
}

void add_generation_option(CLI::App& cmd, int& kernel_generation) {
  cmd.add_option_function<std::string>(
         "--generation",
         [&kernel_generation](const std::string& g) {
           kernel_generation = g == "v2" ? 2 : g == "v3" ? 3 : 0;
         },
         "GPU kernel generation: auto (the backend's choice per launch), v2 (mma.sync) or v3 "
         "(Hopper wgmma + TMA; an error where it cannot run)")
      ->check(CLI::IsMember({"auto", "v2", "v3"}))
      ->default_str("auto");
}

}  // namespace pagedattn::cli
