// A case: one scheduling step described as in docs/cases.md. Parsed from JSON (unknown
// fields and bad values are errors naming the field), or built in code by tests and benchmarks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pagedattn/status.h"
#include "pagedattn/types.h"

namespace pagedattn::testing {

struct CaseSpec {
  std::string name = "case";
  uint64_t seed = 0;
  DType dtype = DType::kBF16;
  KVCacheDType kv_cache_dtype = KVCacheDType::kAuto;
  bool kv_scale_per_head = false;  // "kv_scale": "head"
  int num_heads = 32;
  int num_kv_heads = 8;
  int head_size = 128;
  int block_size = 16;
  std::optional<KVCacheLayout> kv_layout;  // unset = the backend's default
  std::vector<int> seq_lens;
  std::vector<int> query_lens;
  bool causal = true;
  std::optional<double> scale;
  std::optional<SlidingWindow> sliding_window;
  double logits_soft_cap = 0.0;
  bool alibi = false;
  bool sinks = false;
  int common_prefix_len = 0;
  std::optional<int64_t> num_blocks;

  int num_reqs() const { return static_cast<int>(seq_lens.size()); }
  int64_t num_tokens() const;
  // Internal consistency (lengths, heads, prefix vs. block size and contexts, ...).
  Status validate() const;
};

StatusOr<CaseSpec> parse_case_json(const std::string& json_text, const std::string& default_name);
StatusOr<CaseSpec> load_case_file(const std::string& path);
std::string case_to_json(const CaseSpec& spec);  // the resolved case, every field

// ALiBi slopes: 2^(-8 (h+1) / Hq) for power-of-two Hq, the standard interpolation otherwise.
std::vector<float> alibi_slopes(int num_heads);

}  // namespace pagedattn::testing
