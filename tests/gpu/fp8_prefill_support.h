// Shared by the tests of the FP8 tensor cores through the backends (test_fp8_tensor_cores.cc,
// test_fp8_query.cc): the prefill step they run over an e4m3 cache, the FP8 kernel's bounds
// against the float64 oracle (those of test_v3_fp8.cc) and the head sizes it serves in this build.
#pragma once

#include <string>
#include <vector>

#include "kernels/attention/paged_attention.h"
#include "testing/case_spec.h"

namespace pagedattn::test {

inline constexpr double kFp8RelFrobenius = 0.045, kFp8MaxAbs = 0.25, kFp8MaxLse = 0.15;

// Three prefills (one long, one chunk with context, one short) over an e4m3 cache with per-head
// scales, 8 query heads on 2 KV heads.
inline testing::CaseSpec fp8_prefill_step(const std::string& name, int head_size, int block_size) {
  testing::CaseSpec c;
  c.name = name + "_d" + std::to_string(head_size) + "_block" + std::to_string(block_size);
  c.seed = 7 + head_size + block_size;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_size = head_size;
  c.block_size = block_size;
  c.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  c.kv_scale_per_head = true;
  c.seq_lens = {700, 300, 129};
  c.query_lens = {700, 100, 129};
  return c;
}

// The FP8 kernel's head sizes this build compiled.
inline std::vector<int> fp8_kernel_head_sizes() {
  std::vector<int> sizes;
  for (int d : {128, 256}) {
    if (kernels::paged_attention_head_size_built(d)) sizes.push_back(d);
  }
  return sizes;
}

}  // namespace pagedattn::test
