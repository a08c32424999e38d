// Strict JSON for case files (see case_json.h).
#include "testing/case_json.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "testing/case_spec.h"

namespace pagedattn::testing {

std::string clip_for_message(const std::string& text, size_t max_chars) {
  if (text.size() <= max_chars) return text;
  return text.substr(0, max_chars) + "... (" + std::to_string(text.size()) + " characters)";
}

namespace case_json {
namespace {

// Thrown by the parser callback to stop a parse early (caught in parse_json_strictly).
struct ParseRefusal {
  std::string message;
};

}  // namespace

// nlohmann accepts any depth (and dump(), which error messages use, recurses: 10^6 levels overflow
// the stack) and keeps the last of two equal keys silently; the callback refuses both.
StatusOr<json> parse_json_strictly(const std::string& text) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  const json::parser_callback_t callback = [&keys](int depth, json::parse_event_t event,
                                                   json& parsed) {
    if (depth > kMaxCaseJsonDepth) {
      throw ParseRefusal{"values nested deeper than " + std::to_string(kMaxCaseJsonDepth) +
                         " levels"};
    }
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == json::parse_event_t::key && !keys.empty() &&
        !keys.back().insert(parsed.get<std::string>()).second) {
      throw ParseRefusal{"duplicate key '" + clip_for_message(parsed.get<std::string>()) +
                         "' (each field may appear once)"};
    }
    return true;
  };
  try {
    return json::parse(text, callback);
  } catch (const ParseRefusal& refusal) {
    return invalid_argument("refused: " + refusal.message);
  } catch (const json::out_of_range& e) {  // a number past double's range (1e400)
    return invalid_argument(std::string("a number in the case is out of range (") +
                            clip_for_message(e.what()) + "); numbers must be finite doubles");
  } catch (const json::exception& e) {
    return invalid_argument(std::string("not valid JSON: ") + clip_for_message(e.what()));
  }
}

StatusOr<std::string> read_text_file(const std::string& path, const std::string& what,
                                     size_t max_bytes) {
  const std::string cannot = "cannot read " + what + " '" + path + "': ";
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (status.type() == std::filesystem::file_type::not_found) {
    return not_found(cannot + "it does not exist");
  }
  if (error) return not_found(cannot + error.message());
  if (std::filesystem::is_directory(status)) return invalid_argument(cannot + "it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(cannot + std::strerror(errno));
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return not_found(cannot + "read error");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > max_bytes) {
    return invalid_argument(what + " '" + path + "' is larger than " + std::to_string(max_bytes) +
                            " bytes (the limit for a " + what + ")");
  }
  return text;
}

StatusOr<std::string> read_case_text(const std::string& path) {
  return read_text_file(path, "case file", kMaxCaseFileBytes);
}

std::string join(std::initializer_list<const char*> items) {
  std::string out;
  for (const char* item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

std::string range_text(int64_t min_value, int64_t max_value) {
  std::string out = "[";  // appended, not "[" + string: GCC 12 warns -Wrestrict on that form
  out += std::to_string(min_value);
  out += ", ";
  out += std::to_string(max_value);
  return out + "]";
}

Status field_error(const std::string& field, const json& value, const std::string& allowed) {
  return invalid_argument("case field '" + field + "' = " + clip_for_message(value.dump()) +
                          ": expected " + allowed);
}

// nlohmann stores non-negative integers as uint64, negative ones as int64.
bool integer_in(const json& v, int64_t min_value, int64_t max_value) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    return max_value >= 0 && u <= static_cast<uint64_t>(max_value) &&
           static_cast<int64_t>(u) >= min_value;
  }
  return v.get<int64_t>() >= min_value && v.get<int64_t>() <= max_value;
}

StatusOr<int64_t> get_int(const json& j, const std::string& field, int64_t min_value,
                          int64_t max_value, const std::string& why) {
  const json& v = j.at(field);
  if (!integer_in(v, min_value, max_value)) {
    return field_error(field, v, "an integer in " + range_text(min_value, max_value) + why);
  }
  return v.get<int64_t>();
}

StatusOr<bool> get_bool(const json& j, const std::string& field) {
  const json& v = j.at(field);
  if (!v.is_boolean()) return field_error(field, v, "true or false");
  return v.get<bool>();
}

StatusOr<std::optional<double>> get_number(const json& j, const std::string& field,
                                           bool zero_allowed) {
  const json& v = j.at(field);
  if (v.is_null()) return std::optional<double>();
  // Backends take these as float: outside float's normal range a value would become inf, or 0,
  // which means "default scale" / "no cap", another case than the one written.
  const double lo = std::numeric_limits<float>::min(), hi = std::numeric_limits<float>::max();
  const std::string allowed = std::string(zero_allowed ? "0 (off), " : "") +
                              "a number in [1.1754944e-38, 3.4028235e+38] (float's normal range)" +
                              ", or null";
  if (!v.is_number()) return field_error(field, v, allowed);
  const double x = v.get<double>();
  if (!(zero_allowed && x == 0.0) && !(x >= lo && x <= hi)) return field_error(field, v, allowed);
  return std::optional<double>(x);
}

StatusOr<std::string> get_choice(const json& j, const std::string& field,
                                 std::initializer_list<const char*> allowed) {
  const json& v = j.at(field);
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    for (const char* a : allowed) {
      if (s == a) return s;
    }
  }
  return field_error(field, v, "one of " + join(allowed));
}

StatusOr<std::vector<int>> get_int_list(const json& j, const std::string& field) {
  const json& v = j.at(field);
  const std::string allowed = "a non-empty list of at most " + std::to_string(kMaxCaseRequests) +
                              " integers in " + range_text(0, kMaxCaseSeqLen);
  if (!v.is_array() || v.empty() || v.size() > static_cast<size_t>(kMaxCaseRequests)) {
    return field_error(field, v, allowed);
  }
  std::vector<int> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!integer_in(v[i], 0, kMaxCaseSeqLen)) {
      return field_error(field + "[" + std::to_string(i) + "]", v[i],
                         "an integer in " + range_text(0, kMaxCaseSeqLen));
    }
    out.push_back(static_cast<int>(v[i].get<int64_t>()));
  }
  return out;
}

}  // namespace case_json
}  // namespace pagedattn::testing
