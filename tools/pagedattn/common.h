// Small helpers shared by the subcommands: exit statuses, error lines, option validators, and the
// selector configuration a case implies.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "pagedattn/selector.h"
#include "pagedattn/status.h"
#include "testing/batch_params.h"
#include "testing/case_spec.h"

namespace pagedattn::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitBadInput = 2;

// Prints "pagedattn: error: <message>" on stderr and returns kExitBadInput.
int bad_input(const std::string& message);
int bad_input(const Status& status);

// CLI11 validators that accept what the library's parsers accept and name the allowed values.
CLI::Validator dtype_validator();
CLI::Validator kv_cache_dtype_validator();
CLI::Validator layout_validator();
CLI::Validator attn_type_validator();
CLI::Validator compute_capability_validator();
// "auto", or a registered backend's name or alias.
CLI::Validator backend_validator(bool allow_auto);
// An integer in [min_value, max_value], checked on the text before CLI11 converts it (its own
// range validators print doubles: "0.000000 to 1797693...").
CLI::Validator integer_in_range(int64_t min_value, int64_t max_value);
// A finite number > min_value (NaN and infinities refused).
CLI::Validator finite_above(double min_value);
// `--generation auto|v2|v3`: the GPU kernel generation (AttentionImplParams::kernel_generation;
// auto = the backend's choice), for comparisons.
void add_generation_option(CLI::App& cmd, int& kernel_generation);
// A non-empty value (for paths: `--dump ''` is an error, not "no dump").
CLI::Validator non_empty(const std::string& what);

using testing::selector_config_for;  // the selector question a case asks
// The device a forced backend runs on ("CPU_ATTN" -> cpu, otherwise cuda:0); the machine's best
// device for "auto".
Device device_for_backend(const std::string& backend);
// nullopt for "auto", else the name to force.
std::optional<std::string> forced_backend(const std::string& backend);

std::string format_shape(std::span<const int64_t> shape);
std::string format_order(std::span<const int> order);
std::string format_bytes(double bytes);

}  // namespace pagedattn::cli
