// A consistent host-resident batch for metadata tests: query/seq lengths in, every field of
// CommonAttentionMetadata out (shuffled block ids, slots that match the block table).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "pagedattn/metadata.h"

namespace pagedattn::core_test {

struct TestBatch {
  int block_size = 16;
  int64_t num_blocks = 0;
  std::vector<int32_t> query_start_loc;  // [B + 1]
  std::vector<int32_t> seq_lens;         // [B]
  std::vector<int32_t> block_table;      // [B, width]
  int64_t width = 0;
  std::vector<int64_t> slot_mapping;   // [padded tokens]
  std::vector<uint8_t> is_prefilling;  // [B]
  CommonAttentionMetadata meta;

  // Rebuilds `meta` from the vectors (call after editing them).
  void refresh() {
    const int num_reqs = static_cast<int>(seq_lens.size());
    const Device cpu = Device::cpu();
    meta.query_start_loc_cpu = TensorView(query_start_loc.data(), DType::kI32, cpu, {num_reqs + 1});
    meta.query_start_loc = meta.query_start_loc_cpu;
    meta.seq_lens_cpu = TensorView(seq_lens.data(), DType::kI32, cpu, {num_reqs});
    meta.seq_lens = meta.seq_lens_cpu;
    meta.block_table_tensor = TensorView(block_table.data(), DType::kI32, cpu, {num_reqs, width});
    meta.slot_mapping = TensorView(slot_mapping.data(), DType::kI64, cpu,
                                   {static_cast<int64_t>(slot_mapping.size())});
    meta.is_prefilling = TensorView(is_prefilling.data(), DType::kU8, cpu, {num_reqs});
  }
};

// `padded_tokens` > sum(query_lens) adds CUDA-graph padding (slot -1).
inline TestBatch make_test_batch(const std::vector<int>& query_lens,
                                 const std::vector<int>& seq_lens, int block_size = 16,
                                 int padded_tokens = -1, uint32_t seed = 7) {
  TestBatch b;
  b.block_size = block_size;
  const int num_reqs = static_cast<int>(query_lens.size());
  b.query_start_loc.push_back(0);
  int64_t total_blocks = 0;
  for (int r = 0; r < num_reqs; ++r) {
    b.query_start_loc.push_back(b.query_start_loc.back() + query_lens[r]);
    b.seq_lens.push_back(seq_lens[r]);
    b.width = std::max<int64_t>(b.width, (seq_lens[r] + block_size - 1) / block_size);
    total_blocks += (seq_lens[r] + block_size - 1) / block_size;
  }
  b.width += 1;                     // one spare column, as engines over-allocate
  b.num_blocks = total_blocks + 3;  // spare blocks
  std::vector<int32_t> ids(b.num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  b.block_table.assign(num_reqs * b.width, 0);
  size_t next = 0;
  for (int r = 0; r < num_reqs; ++r) {
    for (int64_t c = 0; c < (seq_lens[r] + block_size - 1) / block_size; ++c) {
      b.block_table[r * b.width + c] = ids[next++];
    }
  }
  const int real_tokens = b.query_start_loc.back();
  b.slot_mapping.assign(std::max(real_tokens, padded_tokens), -1);
  for (int r = 0; r < num_reqs; ++r) {
    const int context = seq_lens[r] - query_lens[r];
    for (int i = 0; i < query_lens[r]; ++i) {
      const int pos = context + i;
      b.slot_mapping[b.query_start_loc[r] + i] =
          int64_t{b.block_table[r * b.width + pos / block_size]} * block_size + pos % block_size;
    }
  }
  b.is_prefilling.assign(num_reqs, 0);
  b.meta.num_reqs = num_reqs;
  b.meta.num_actual_tokens = std::max(real_tokens, padded_tokens);
  b.meta.max_query_len =
      query_lens.empty() ? 0 : *std::max_element(query_lens.begin(), query_lens.end());
  b.meta.max_seq_len = seq_lens.empty() ? 0 : *std::max_element(seq_lens.begin(), seq_lens.end());
  b.refresh();
  return b;
}

}  // namespace pagedattn::core_test
