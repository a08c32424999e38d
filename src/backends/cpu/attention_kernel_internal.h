// Pieces shared by the per-instruction-set builds of the attention kernel and its driver.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/attention_kernel.h"
#include "pagedattn/types.h"

namespace pagedattn::cpu {

constexpr int kKeyTile = 16;  // keys converted to float and processed together

// One unit of parallel work: query rows [row_begin, row_end) of a request, all query heads of KV
// heads [kv_head_begin, kv_head_end), against every key the rows can see.
struct Task {
  int request = 0;
  int kv_head_begin = 0;
  int kv_head_end = 0;
  int row_begin = 0;
  int row_end = 0;
};

// Per-thread working memory, grown on demand and reused across tasks and calls.
struct Scratch {
  std::vector<float> q;       // [nq, D] query vectors of the task
  std::vector<float> acc;     // [nq, D] unnormalised outputs
  std::vector<float> m;       // [nq] running max
  std::vector<float> l;       // [nq] running denominator
  std::vector<int> lo, hi;    // [nq] visible keys [lo, hi), pass-local
  std::vector<float> k_tile;  // [kKeyTile, D] one KV head's keys, converted
  std::vector<float> v_tile;  // [kKeyTile, D]
  std::vector<float> scores;  // [kKeyTile]

  void reserve(int nq, int dim) {
    const size_t rows = static_cast<size_t>(nq) * dim;
    if (q.size() < rows) q.resize(rows), acc.resize(rows);
    if (m.size() < static_cast<size_t>(nq))
      m.resize(nq), l.resize(nq), lo.resize(nq), hi.resize(nq);
    const size_t tile = static_cast<size_t>(kKeyTile) * dim;
    if (k_tile.size() < tile) k_tile.resize(tile), v_tile.resize(tile);
    if (scores.size() < static_cast<size_t>(kKeyTile)) scores.resize(kKeyTile);
  }
};

// Tests use this to run the portable build on a machine that would pick the AVX2 one.
void force_portable_kernel(bool force);

namespace avx2 {
void run_task(const AttentionPass& pass, const Task& task, Scratch& scratch);
}
namespace generic {
void run_task(const AttentionPass& pass, const Task& task, Scratch& scratch);
}

}  // namespace pagedattn::cpu
