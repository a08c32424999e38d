// Strict JSON for case files: reading a file with each failure named (missing, a directory, not
// readable, too large), parsing with a depth limit and duplicate keys refused, and typed field
// getters whose errors name the field, the value (clipped) and the allowed range. Used by
// case_spec.cc (and by serve's trace reader for the reading and the parsing).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pagedattn/status.h"

namespace pagedattn::testing::case_json {

using nlohmann::json;

// The whole file as text; refuses a path that is missing, a directory, unreadable or larger than
// max_bytes (read at most that much, so /dev/zero is refused too). `what` names it in messages.
StatusOr<std::string> read_text_file(const std::string& path, const std::string& what,
                                     size_t max_bytes);
StatusOr<std::string> read_case_text(const std::string& path);  // a case file: kMaxCaseFileBytes
// Parses JSON text; refuses nesting deeper than kMaxCaseJsonDepth, a key twice in one object, and
// numbers past double's range. Never throws.
StatusOr<json> parse_json_strictly(const std::string& text);

std::string join(std::initializer_list<const char*> items);
std::string range_text(int64_t min_value, int64_t max_value);  // "[min, max]"
// "case field 'FIELD' = VALUE: expected ALLOWED", VALUE clipped.
Status field_error(const std::string& field, const json& value, const std::string& allowed);
// An integer in [min_value, max_value], checked before any narrowing.
bool integer_in(const json& v, int64_t min_value, int64_t max_value);
StatusOr<int64_t> get_int(const json& j, const std::string& field, int64_t min_value,
                          int64_t max_value, const std::string& why = "");
StatusOr<bool> get_bool(const json& j, const std::string& field);
// A number in float's normal range, or 0 when `zero_allowed`; null is returned as nullopt.
StatusOr<std::optional<double>> get_number(const json& j, const std::string& field,
                                           bool zero_allowed);
StatusOr<std::string> get_choice(const json& j, const std::string& field,
                                 std::initializer_list<const char*> allowed);
// A non-empty list of at most kMaxCaseRequests integers in [0, kMaxCaseSeqLen].
StatusOr<std::vector<int>> get_int_list(const json& j, const std::string& field);

}  // namespace pagedattn::testing::case_json
