// Case files (docs/cases.md): JSON -> CaseSpec with every field checked by name.
#include "testing/case_spec.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include <nlohmann/json.hpp>

namespace pagedattn::testing {
namespace {

using nlohmann::json;

constexpr std::initializer_list<const char*> kFields = {"name",
                                                        "seed",
                                                        "dtype",
                                                        "kv_cache_dtype",
                                                        "kv_scale",
                                                        "num_heads",
                                                        "num_kv_heads",
                                                        "head_size",
                                                        "block_size",
                                                        "kv_layout",
                                                        "seq_lens",
                                                        "query_lens",
                                                        "causal",
                                                        "scale",
                                                        "sliding_window",
                                                        "logits_soft_cap",
                                                        "alibi",
                                                        "sinks",
                                                        "common_prefix_len",
                                                        "num_blocks"};

std::string join(std::initializer_list<const char*> items) {
  std::string out;
  for (const char* item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

Status field_error(const std::string& field, const json& value, const std::string& allowed) {
  return invalid_argument("case field '" + field + "' = " + value.dump() + ": expected " + allowed);
}

StatusOr<int64_t> get_int(const json& j, const std::string& field, int64_t min_value) {
  const json& v = j.at(field);
  if (!v.is_number_integer())
    return field_error(field, v, "an integer >= " + std::to_string(min_value));
  int64_t x = v.get<int64_t>();
  if (x < min_value) return field_error(field, v, "an integer >= " + std::to_string(min_value));
  return x;
}

StatusOr<bool> get_bool(const json& j, const std::string& field) {
  const json& v = j.at(field);
  if (!v.is_boolean()) return field_error(field, v, "true or false");
  return v.get<bool>();
}

// A finite number; null allowed when `nullable` (returned as nullopt).
StatusOr<std::optional<double>> get_number(const json& j, const std::string& field, bool nullable,
                                           const std::string& allowed) {
  const json& v = j.at(field);
  if (nullable && v.is_null()) return std::optional<double>();
  if (!v.is_number() || !std::isfinite(v.get<double>())) return field_error(field, v, allowed);
  return std::optional<double>(v.get<double>());
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
  const std::string allowed = "a non-empty list of integers >= 0";
  if (!v.is_array() || v.empty()) return field_error(field, v, allowed);
  std::vector<int> out;
  for (const json& item : v) {
    if (!item.is_number_integer() || item.get<int64_t>() < 0 || item.get<int64_t>() > (1 << 30)) {
      return field_error(field, v, allowed);
    }
    out.push_back(item.get<int>());
  }
  return out;
}

Status parse_fields(const json& j, CaseSpec& spec) {
  auto has = [&](const char* field) { return j.contains(field); };
  if (has("name")) {
    if (!j["name"].is_string()) return field_error("name", j["name"], "a string");
    spec.name = j["name"].get<std::string>();
  }
  if (has("seed")) {
    const json& v = j["seed"];
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
      return field_error("seed", v, "an integer >= 0");
    }
    spec.seed = v.get<uint64_t>();
  }
  if (has("dtype")) {
    PAGEDATTN_ASSIGN_OR_RETURN(std::string s, get_choice(j, "dtype", {"f16", "bf16", "f32"}));
    PAGEDATTN_ASSIGN_OR_RETURN(spec.dtype, parse_dtype(s));
  }
  if (has("kv_cache_dtype")) {
    PAGEDATTN_ASSIGN_OR_RETURN(std::string s,
                               get_choice(j, "kv_cache_dtype", {"auto", "fp8_e4m3", "fp8_e5m2"}));
    PAGEDATTN_ASSIGN_OR_RETURN(spec.kv_cache_dtype, parse_kv_cache_dtype(s));
  }
  if (has("kv_scale")) {
    PAGEDATTN_ASSIGN_OR_RETURN(std::string s, get_choice(j, "kv_scale", {"tensor", "head"}));
    spec.kv_scale_per_head = s == "head";
  }
  if (has("num_heads")) {
    PAGEDATTN_ASSIGN_OR_RETURN(int64_t v, get_int(j, "num_heads", 1));
    spec.num_heads = static_cast<int>(v);
  }
  if (has("num_kv_heads")) {
    PAGEDATTN_ASSIGN_OR_RETURN(int64_t v, get_int(j, "num_kv_heads", 1));
    spec.num_kv_heads = static_cast<int>(v);
  }
  if (has("head_size")) {
    PAGEDATTN_ASSIGN_OR_RETURN(int64_t v, get_int(j, "head_size", 1));
    spec.head_size = static_cast<int>(v);
  }
  if (has("block_size")) {
    PAGEDATTN_ASSIGN_OR_RETURN(int64_t v, get_int(j, "block_size", 1));
    spec.block_size = static_cast<int>(v);
  }
  if (has("kv_layout") && !j["kv_layout"].is_null()) {
    PAGEDATTN_ASSIGN_OR_RETURN(std::string s, get_choice(j, "kv_layout", {"NHD", "HND"}));
    PAGEDATTN_ASSIGN_OR_RETURN(spec.kv_layout, parse_kv_cache_layout(s));
  }
  if (!has("seq_lens")) return invalid_argument("case field 'seq_lens' is required");
  if (!has("query_lens")) return invalid_argument("case field 'query_lens' is required");
  PAGEDATTN_ASSIGN_OR_RETURN(spec.seq_lens, get_int_list(j, "seq_lens"));
  PAGEDATTN_ASSIGN_OR_RETURN(spec.query_lens, get_int_list(j, "query_lens"));
  if (has("causal")) {
    PAGEDATTN_ASSIGN_OR_RETURN(spec.causal, get_bool(j, "causal"));
  }
  if (has("scale")) {
    PAGEDATTN_ASSIGN_OR_RETURN(spec.scale, get_number(j, "scale", true, "a number > 0 or null"));
  }
  if (has("sliding_window") && !j["sliding_window"].is_null()) {
    const json& v = j["sliding_window"];
    const std::string allowed = "[left, right] with integers >= -1 (-1 = unbounded), or null";
    if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer() ||
        v[0].get<int64_t>() < -1 || v[1].get<int64_t>() < -1) {
      return field_error("sliding_window", v, allowed);
    }
    spec.sliding_window = SlidingWindow{v[0].get<int>(), v[1].get<int>()};
  }
  if (has("logits_soft_cap")) {
    PAGEDATTN_ASSIGN_OR_RETURN(std::optional<double> cap,
                               get_number(j, "logits_soft_cap", true, "a number >= 0 or null"));
    spec.logits_soft_cap = cap.value_or(0.0);
  }
  if (has("alibi")) {
    PAGEDATTN_ASSIGN_OR_RETURN(spec.alibi, get_bool(j, "alibi"));
  }
  if (has("sinks")) {
    PAGEDATTN_ASSIGN_OR_RETURN(spec.sinks, get_bool(j, "sinks"));
  }
  if (has("common_prefix_len")) {
    PAGEDATTN_ASSIGN_OR_RETURN(int64_t v, get_int(j, "common_prefix_len", 0));
    spec.common_prefix_len = static_cast<int>(v);
  }
  if (has("num_blocks") && !j["num_blocks"].is_null()) {
    PAGEDATTN_ASSIGN_OR_RETURN(spec.num_blocks, get_int(j, "num_blocks", 1));
  }
  return ok_status();
}

}  // namespace

int64_t CaseSpec::num_tokens() const {
  int64_t total = 0;
  for (int q : query_lens) total += q;
  return total;
}

Status CaseSpec::validate() const {
  if (num_heads <= 0)
    return invalid_argument("num_heads = " + std::to_string(num_heads) + ": must be > 0");
  if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0) {
    return invalid_argument("num_kv_heads = " + std::to_string(num_kv_heads) +
                            ": must be > 0 and divide num_heads = " + std::to_string(num_heads));
  }
  if (head_size <= 0)
    return invalid_argument("head_size = " + std::to_string(head_size) + ": must be > 0");
  if (block_size <= 0) {
    return invalid_argument("block_size = " + std::to_string(block_size) + ": must be > 0");
  }
  if (seq_lens.empty())
    return invalid_argument("seq_lens is empty: a case needs at least one request");
  if (seq_lens.size() != query_lens.size()) {
    return invalid_argument("query_lens has " + std::to_string(query_lens.size()) +
                            " entries but seq_lens has " + std::to_string(seq_lens.size()) +
                            ": one per request in both");
  }
  for (int r = 0; r < num_reqs(); ++r) {
    if (seq_lens[r] < 0 || query_lens[r] < 0 || query_lens[r] > seq_lens[r]) {
      return invalid_argument(
          "request " + std::to_string(r) + ": query_lens = " + std::to_string(query_lens[r]) +
          ", seq_lens = " + std::to_string(seq_lens[r]) + ": need 0 <= query_len <= seq_len");
    }
  }
  if (num_tokens() == 0)
    return invalid_argument("query_lens are all 0: a case needs at least one token");
  if (scale && !(*scale > 0.0)) {
    return invalid_argument("scale = " + std::to_string(*scale) + ": must be > 0 (or null)");
  }
  if (logits_soft_cap < 0.0) {
    return invalid_argument("logits_soft_cap = " + std::to_string(logits_soft_cap) +
                            ": must be >= 0 (or null)");
  }
  if (sliding_window && (sliding_window->left < -1 || sliding_window->right < -1)) {
    return invalid_argument("sliding_window values must be >= -1");
  }
  if (common_prefix_len < 0 || common_prefix_len % block_size != 0) {
    return invalid_argument("common_prefix_len = " + std::to_string(common_prefix_len) +
                            ": must be a multiple of block_size = " + std::to_string(block_size));
  }
  for (int r = 0; r < num_reqs(); ++r) {
    if (common_prefix_len > seq_lens[r] - query_lens[r]) {
      return invalid_argument("common_prefix_len = " + std::to_string(common_prefix_len) +
                              ": exceeds the context length " +
                              std::to_string(seq_lens[r] - query_lens[r]) + " of request " +
                              std::to_string(r) + " (the shared prefix must be cached context)");
    }
  }
  if (num_blocks && *num_blocks <= 0) return invalid_argument("num_blocks must be > 0 (or null)");
  return ok_status();
}

StatusOr<CaseSpec> parse_case_json(const std::string& json_text, const std::string& default_name) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    return invalid_argument(std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return invalid_argument("a case must be a JSON object");
  for (const auto& item : j.items()) {
    if (std::find_if(kFields.begin(), kFields.end(),
                     [&](const char* f) { return item.key() == f; }) == kFields.end()) {
      return invalid_argument("unknown case field '" + item.key() +
                              "'; known fields: " + join(kFields));
    }
  }
  CaseSpec spec;
  spec.name = default_name;
  PAGEDATTN_RETURN_IF_ERROR(parse_fields(j, spec));
  PAGEDATTN_RETURN_IF_ERROR(spec.validate());
  return spec;
}

StatusOr<CaseSpec> load_case_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("cannot read case file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  std::string stem = path.substr(path.find_last_of('/') + 1);
  if (stem.size() > 5 && stem.ends_with(".json")) stem.resize(stem.size() - 5);
  StatusOr<CaseSpec> spec = parse_case_json(text.str(), stem);
  if (!spec.ok()) return Status(spec.status().code(), path + ": " + spec.status().message());
  return spec;
}

std::string case_to_json(const CaseSpec& spec) {
  json j;
  j["name"] = spec.name;
  j["seed"] = spec.seed;
  j["dtype"] = std::string(dtype_name(spec.dtype));
  j["kv_cache_dtype"] = std::string(kv_cache_dtype_name(spec.kv_cache_dtype));
  j["kv_scale"] = spec.kv_scale_per_head ? "head" : "tensor";
  j["num_heads"] = spec.num_heads;
  j["num_kv_heads"] = spec.num_kv_heads;
  j["head_size"] = spec.head_size;
  j["block_size"] = spec.block_size;
  j["kv_layout"] =
      spec.kv_layout ? json(std::string(kv_cache_layout_name(*spec.kv_layout))) : json(nullptr);
  j["seq_lens"] = spec.seq_lens;
  j["query_lens"] = spec.query_lens;
  j["causal"] = spec.causal;
  j["scale"] = spec.scale ? json(*spec.scale) : json(nullptr);
  j["sliding_window"] = spec.sliding_window
                            ? json::array({spec.sliding_window->left, spec.sliding_window->right})
                            : json(nullptr);
  j["logits_soft_cap"] = spec.logits_soft_cap > 0 ? json(spec.logits_soft_cap) : json(nullptr);
  j["alibi"] = spec.alibi;
  j["sinks"] = spec.sinks;
  j["common_prefix_len"] = spec.common_prefix_len;
  j["num_blocks"] = spec.num_blocks ? json(*spec.num_blocks) : json(nullptr);
  return j.dump(1);
}

std::vector<float> alibi_slopes(int num_heads) {
  // The standard ALiBi slopes: a geometric sequence for the largest power of two <= num_heads, then
  // the odd terms of the sequence for twice that many heads.
  int pow2 = 1;
  while (pow2 * 2 <= num_heads) pow2 *= 2;
  std::vector<float> slopes;
  const double base = std::pow(2.0, -8.0 / pow2);
  for (int i = 1; i <= pow2; ++i) slopes.push_back(static_cast<float>(std::pow(base, i)));
  if (pow2 < num_heads) {
    const double extra_base = std::pow(2.0, -4.0 / pow2);
    const int remaining = std::min(pow2, num_heads - pow2);
    for (int i = 0; i < remaining; ++i) {
      slopes.push_back(static_cast<float>(std::pow(extra_base, 2 * i + 1)));
    }
  }
  return slopes;
}

}  // namespace pagedattn::testing
