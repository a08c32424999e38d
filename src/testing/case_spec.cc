// Case files (docs/cases.md): JSON -> CaseSpec with every field checked by name.
#include "testing/case_spec.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/checked_math.h"
#include "testing/case_json.h"
#include "testing/host_batch.h"

namespace pagedattn::testing {
namespace {

using nlohmann::json;
using namespace case_json;  // NOLINT: the field getters

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

Status parse_fields(const json& j, CaseSpec& spec) {
  auto has = [&](const char* field) { return j.contains(field); };
  auto int_field = [&](const char* field, int64_t min_value, int64_t max_value,
                       int& out) -> Status {
    if (!has(field)) return ok_status();
    PAGEDATTN_ASSIGN_OR_RETURN(int64_t v, get_int(j, field, min_value, max_value));
    out = static_cast<int>(v);
    return ok_status();
  };
  if (has("name")) {
    const json& v = j["name"];
    if (!v.is_string() || v.get_ref<const std::string&>().size() > kMaxCaseNameChars) {
      return field_error("name", v,
                         "a string of at most " + std::to_string(kMaxCaseNameChars) + " bytes");
    }
    spec.name = v.get<std::string>();
  }
  if (has("seed")) {
    const json& v = j["seed"];
    if (!v.is_number_unsigned()) return field_error("seed", v, "an integer in [0, 2^64 - 1]");
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
  PAGEDATTN_RETURN_IF_ERROR(int_field("num_heads", 1, kMaxCaseHeads, spec.num_heads));
  PAGEDATTN_RETURN_IF_ERROR(int_field("num_kv_heads", 1, kMaxCaseHeads, spec.num_kv_heads));
  PAGEDATTN_RETURN_IF_ERROR(int_field("head_size", 1, kMaxCaseHeadSize, spec.head_size));
  PAGEDATTN_RETURN_IF_ERROR(int_field("block_size", 1, kMaxCaseBlockSize, spec.block_size));
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
    PAGEDATTN_ASSIGN_OR_RETURN(spec.scale, get_number(j, "scale", /*zero_allowed=*/false));
  }
  if (has("sliding_window") && !j["sliding_window"].is_null()) {
    const json& v = j["sliding_window"];
    const int64_t max_side = std::numeric_limits<int32_t>::max();
    if (!v.is_array() || v.size() != 2 || !integer_in(v[0], -1, max_side) ||
        !integer_in(v[1], -1, max_side)) {
      return field_error("sliding_window", v,
                         "[left, right] with integers in " + range_text(-1, max_side) +
                             " (-1 = unbounded), or null");
    }
    spec.sliding_window =
        SlidingWindow{static_cast<int>(v[0].get<int64_t>()), static_cast<int>(v[1].get<int64_t>())};
  }
  if (has("logits_soft_cap")) {
    PAGEDATTN_ASSIGN_OR_RETURN(std::optional<double> cap,
                               get_number(j, "logits_soft_cap", /*zero_allowed=*/true));
    spec.logits_soft_cap = cap.value_or(0.0);
  }
  if (has("alibi")) {
    PAGEDATTN_ASSIGN_OR_RETURN(spec.alibi, get_bool(j, "alibi"));
  }
  if (has("sinks")) {
    PAGEDATTN_ASSIGN_OR_RETURN(spec.sinks, get_bool(j, "sinks"));
  }
  PAGEDATTN_RETURN_IF_ERROR(
      int_field("common_prefix_len", 0, kMaxCaseSeqLen, spec.common_prefix_len));
  if (has("num_blocks") && !j["num_blocks"].is_null()) {
    PAGEDATTN_ASSIGN_OR_RETURN(
        spec.num_blocks,
        get_int(j, "num_blocks", 1, std::numeric_limits<int32_t>::max(), " (block ids are int32)"));
  }
  return ok_status();
}

}  // namespace

int64_t CaseSpec::num_tokens() const {
  int64_t total = 0;
  for (int q : query_lens) total += q;
  return total;
}

int64_t CaseSpec::blocks_needed() const {
  const int64_t shared = common_prefix_len / block_size;
  int64_t needed = shared;
  for (int seq_len : seq_lens) {
    needed += std::max<int64_t>(0, (int64_t{seq_len} + block_size - 1) / block_size - shared);
  }
  return needed;
}

StatusOr<int64_t> CaseSpec::host_bytes() const {
  const int64_t tokens = num_tokens();
  const int64_t elem = static_cast<int64_t>(dtype_size(dtype));
  const int64_t stored = is_fp8(kv_cache_dtype) ? 1 : elem;
  const int64_t blocks = num_blocks.value_or(blocks_needed() + 3);
  int64_t max_blocks = 1;
  for (int seq_len : seq_lens) max_blocks = std::max<int64_t>(max_blocks, seq_len / block_size + 1);
  const std::optional<int64_t> parts[] = {
      checked_product({blocks, 2, block_size, num_kv_heads, head_size, stored}),  // cache
      checked_product({tokens, num_heads, head_size, 2 * elem + 8}),  // query, output, oracle's
      checked_product({tokens, num_kv_heads, head_size, 2 * elem}),   // key, value
      checked_product({tokens, num_heads, 8}),                        // lse: ours, the oracle's
      checked_product({num_reqs(), max_blocks, 4}),                   // block table
  };
  int64_t total = 0;
  for (const std::optional<int64_t>& part : parts) {
    const std::optional<int64_t> sum = part ? checked_add(total, *part) : std::nullopt;
    if (!sum)
      return out_of_range("case '" + clip_for_message(name) + "': its size overflows int64");
    total = *sum;
  }
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
  if (num_blocks && (*num_blocks <= 0 || *num_blocks > std::numeric_limits<int32_t>::max())) {
    return invalid_argument("num_blocks = " + std::to_string(*num_blocks) +
                            ": allowed [1, 2147483647] (block ids are int32), or null");
  }
  // Sizes: the metadata's token counts and block ids are int32, and everything is allocated on the
  // host before it runs.
  if (num_tokens() > std::numeric_limits<int32_t>::max()) {
    return invalid_argument("query_lens sum to " + std::to_string(num_tokens()) +
                            " tokens: allowed at most 2147483647 (token offsets are int32)");
  }
  if (blocks_needed() + 3 > std::numeric_limits<int32_t>::max()) {
    return invalid_argument("the batch needs " + std::to_string(blocks_needed()) + " blocks of " +
                            std::to_string(block_size) +
                            " tokens: allowed at most 2147483644 (block ids are int32)");
  }
  PAGEDATTN_ASSIGN_OR_RETURN(const int64_t bytes, host_bytes());
  if (bytes > kMaxCaseHostBytes) {
    return invalid_argument("the case needs about " + std::to_string(bytes >> 20) +
                            " MiB of host memory (KV cache, Q/K/V, outputs): allowed at most " +
                            std::to_string(kMaxCaseHostBytes >> 20) + " MiB");
  }
  return ok_status();
}

StatusOr<CaseSpec> parse_case_json(const std::string& json_text, const std::string& default_name) {
  if (json_text.size() > kMaxCaseFileBytes) {
    return invalid_argument("case text of " + std::to_string(json_text.size()) +
                            " bytes is larger than " + std::to_string(kMaxCaseFileBytes) +
                            " (the limit for a case)");
  }
  PAGEDATTN_ASSIGN_OR_RETURN(const json j, parse_json_strictly(json_text));
  if (!j.is_object()) return invalid_argument("a case must be a JSON object");
  for (const auto& item : j.items()) {
    if (std::find_if(kFields.begin(), kFields.end(),
                     [&](const char* f) { return item.key() == f; }) == kFields.end()) {
      return invalid_argument("unknown case field '" + clip_for_message(item.key()) +
                              "'; known fields: " + join(kFields));
    }
  }
  CaseSpec spec;
  spec.name = default_name;
  PAGEDATTN_RETURN_IF_ERROR(parse_fields(j, spec));
  // A file that asks for per-head scales on a cache without scales would silently get another case
  // (code that builds a CaseSpec may leave the flag set: it only applies to FP8 caches).
  if (spec.kv_scale_per_head && !is_fp8(spec.kv_cache_dtype)) {
    return invalid_argument(
        "case field 'kv_scale' = \"head\": per-head scales need an FP8 "
        "kv_cache_dtype (fp8_e4m3, fp8_e5m2), got " +
        std::string(kv_cache_dtype_name(spec.kv_cache_dtype)));
  }
  PAGEDATTN_RETURN_IF_ERROR(spec.validate());
  return spec;
}

StatusOr<CaseSpec> load_case_file(const std::string& path) {
  PAGEDATTN_ASSIGN_OR_RETURN(const std::string text, read_case_text(path));
  std::string stem = path.substr(path.find_last_of('/') + 1);
  if (stem.size() > 5 && stem.ends_with(".json")) stem.resize(stem.size() - 5);
  StatusOr<CaseSpec> spec = parse_case_json(text, stem);
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

AttentionSelectorConfig selector_config_for(const CaseSpec& spec, const Device& device) {
  return selector_config(attention_layer_for(spec, KVCacheLayout::kNHD, device), spec.causal);
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
