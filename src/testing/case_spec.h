// A case: one scheduling step described as in docs/cases.md. Parsed from JSON (unknown
// fields and bad values are errors naming the field), or built in code by tests and benchmarks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pagedattn/backend.h"
#include "pagedattn/status.h"
#include "pagedattn/types.h"

namespace pagedattn::testing {

// Limits of a case: what a case file may hold, and the host memory a case may need (checked before
// anything is allocated, so an absurd case is an error naming its size, not an allocation failure).
inline constexpr size_t kMaxCaseFileBytes = size_t{1} << 20;
inline constexpr int kMaxCaseJsonDepth = 8;  // a valid case nests 2 levels
inline constexpr size_t kMaxCaseNameChars = 256;
inline constexpr int64_t kMaxCaseRequests = int64_t{1} << 16;
inline constexpr int64_t kMaxCaseSeqLen = int64_t{1} << 30;
inline constexpr int64_t kMaxCaseHeads = int64_t{1} << 16;
inline constexpr int64_t kMaxCaseHeadSize = int64_t{1} << 16;
inline constexpr int64_t kMaxCaseBlockSize = int64_t{1} << 20;
inline constexpr int64_t kMaxCaseHostBytes = int64_t{64} << 30;

// `text` cut to at most `max_chars` characters for an error message (a value echoed in full could
// be megabytes), with the original length said when cut.
std::string clip_for_message(const std::string& text, size_t max_chars = 120);

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
  // KV-cache blocks the batch uses (the shared prefix's once); num_blocks defaults to this + 3.
  int64_t blocks_needed() const;
  // About how much host memory running the case takes (cache, Q/K/V, output, the oracle's
  // float64 output); an error when the count overflows int64. Needs the sizes to be positive.
  StatusOr<int64_t> host_bytes() const;
  // Internal consistency (lengths, heads, prefix vs. block size and contexts, ...) and the size
  // limits above (token count and block ids fit int32, host_bytes() <= kMaxCaseHostBytes).
  Status validate() const;
};

StatusOr<CaseSpec> parse_case_json(const std::string& json_text, const std::string& default_name);
StatusOr<CaseSpec> load_case_file(const std::string& path);
std::string case_to_json(const CaseSpec& spec);  // the resolved case, every field

// The selector question a case asks, on `device` (a decoder layer).
AttentionSelectorConfig selector_config_for(const CaseSpec& spec, const Device& device);

// ALiBi slopes: 2^(-8 (h+1) / Hq) for power-of-two Hq, the standard interpolation otherwise.
std::vector<float> alibi_slopes(int num_heads);

}  // namespace pagedattn::testing
