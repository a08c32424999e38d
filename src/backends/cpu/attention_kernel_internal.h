// Pieces shared by the attention kernel's driver (attention_kernel.cc) and its SIMD body
// (attention_task-inl.h).
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/attention_kernel.h"
#include "common/mask.h"

namespace pagedattn::cpu {

constexpr int kKeyTile = 32;     // keys widened to float and processed together
constexpr int kDecodeTile = 64;  // keys of one online-softmax step of the decode kernel
constexpr int kMaxTile = kDecodeTile > kKeyTile ? kDecodeTile : kKeyTile;
constexpr int kQueryBlock = 4;  // at most this many query vectors are scored together
constexpr int kChunk = 256;     // most keys of one oneDNN product (onednn_tiles.h)

// One unit of parallel work: query rows [row_begin, row_end) of a request, all query heads of KV
// heads [kv_head_begin, kv_head_end), against every key the rows can see.
struct Task {
  int request = 0;
  int kv_head_begin = 0;
  int kv_head_end = 0;
  int row_begin = 0;
  int row_end = 0;
};

// Per-thread working memory, grown on demand and reused across tasks and calls. Query vectors are
// ordered by KV head, then row, then query head of the group, so that a KV head's are contiguous.
struct Scratch {
  std::vector<float> q;       // [nq, D] query vectors of the task, widened
  std::vector<float> acc;     // [nq, D] unnormalised outputs
  std::vector<float> m;       // [nq] running max
  std::vector<float> l;       // [nq] running denominator
  std::vector<int> lo, hi;    // [nq] visible keys [lo, hi), pass-local
  std::vector<float> k_tile;  // [KV heads, kKeyTile, D] the task's keys, widened
  std::vector<float> v_tile;  // [KV heads, kKeyTile, D]
  std::vector<float> p;       // [kQueryBlock, tile] scores, then softmax weights
  std::vector<float> row;     // [D] one query or output row in element order (decode kernel)
  std::vector<uint16_t> w16;  // [kQueryBlock, kDecodeTile] softmax weights as bf16 (decode kernel)
  // Chunks of keys on oneDNN: bf16 queries, keys, values and weights; float scores and products.
  std::vector<uint16_t> q16;       // [nq, D]
  std::vector<uint16_t> k16, v16;  // [kChunk, D]
  std::vector<uint16_t> p16;       // [nq, kChunk]
  std::vector<float> scores;       // [nq, kChunk]
  std::vector<float> product;      // [nq, D]
  std::vector<float> correction;   // [nq] rescale of each output after a chunk's softmax

  void reserve(int nq, int kv_heads, int dim) {
    const size_t rows = static_cast<size_t>(nq) * dim;
    if (q.size() < rows) q.resize(rows), acc.resize(rows);
    if (m.size() < static_cast<size_t>(nq))
      m.resize(nq), l.resize(nq), lo.resize(nq), hi.resize(nq);
    const size_t tile = static_cast<size_t>(kv_heads) * kKeyTile * dim;
    if (k_tile.size() < tile) k_tile.resize(tile), v_tile.resize(tile);
    if (p.size() < static_cast<size_t>(kQueryBlock) * kMaxTile) p.resize(kQueryBlock * kMaxTile);
  }

  void reserve_chunks(int nq, int dim) {
    const size_t rows = static_cast<size_t>(nq) * dim, chunk = static_cast<size_t>(kChunk) * dim;
    if (q16.size() < rows) q16.resize(rows), product.resize(rows);
    if (correction.size() < static_cast<size_t>(nq)) correction.resize(nq);
    if (k16.size() < chunk) k16.resize(chunk), v16.resize(chunk);
    const size_t weights = static_cast<size_t>(nq) * kChunk;
    if (p16.size() < weights) p16.resize(weights), scores.resize(weights);
  }
};

// Whether the decode kernels serve a pass's single rows: no score modifier that needs the scores
// one by one (attention_kernel.cc's task split).
inline bool decode_kernels_serve(const AttentionPass& pass) {
  return pass.alibi_slopes == nullptr && !mask::soft_cap_applies(pass.soft_cap);
}

// Tasks the decode kernels serve: one query row of such a pass (cpu_simd.cc's dispatch).
inline bool decode_kernel_applies(const AttentionPass& pass, const Task& task) {
  return task.row_end - task.row_begin == 1 && decode_kernels_serve(pass);
}

}  // namespace pagedattn::cpu
