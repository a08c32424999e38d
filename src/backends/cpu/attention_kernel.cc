// The driver of the CPU attention kernel: splits a pass into tasks and runs them on the thread
// pool; each task runs the SIMD build chosen at run time (cpu_simd.h).
#include "backends/cpu/attention_kernel.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/attention_kernel_internal.h"
#include "backends/cpu/cpu_simd.h"
#include "backends/cpu/onednn_tiles.h"
#include "backends/cpu/thread_pool.h"

namespace pagedattn::cpu {
namespace {

// Query vectors (rows x heads of a group) that share one widened key tile in a task; more where
// prefill chunks run on oneDNN, whose products gain from taller operands.
constexpr int kQueryVectorsPerTask = 64;
constexpr int kQueryVectorsPerOnednnTask = 256;

// Requests of at most this many query rows (decodes, speculative verification) run a row per task
// on the decode kernel where it applies: reading the keys once per row from the cache, straight
// into registers, beats widening them into float tiles once for all rows.
constexpr int kMaxRowsAsDecodes = 8;

bool rows_as_decodes(const AttentionPass& pass, const RequestPass& rp) {
  return rp.q_len <= kMaxRowsAsDecodes && decode_kernels_serve(pass);
}

int query_vectors_per_task(const AttentionPass& pass) {
  const bool bf16 = pass.kv.dtype == DType::kBF16 && pass.query_dtype == DType::kBF16;
  return bf16 && onednn_tiles_available() ? kQueryVectorsPerOnednnTask : kQueryVectorsPerTask;
}

}  // namespace

void run_attention_pass(const AttentionPass& pass) {
  // A task holds about kQueryVectorsPerTask query vectors: decode tasks take several KV heads (one
  // pass over each token's contiguous NHD row), prefill tasks take rows of one KV head. Heads are
  // split further while there are too few tasks to keep every thread busy.
  const int group = pass.num_heads / pass.num_kv_heads;
  const int per_task = query_vectors_per_task(pass);
  const size_t enough_tasks = 4 * static_cast<size_t>(cpu_thread_count());
  thread_local std::vector<Task> tasks;  // reused: no allocation per pass
  thread_local std::vector<int64_t> cost;
  thread_local std::vector<int> order;
  for (int heads_cap = pass.num_kv_heads;; heads_cap = std::max(1, heads_cap / 2)) {
    tasks.clear();
    cost.clear();
    for (int r = 0; r < static_cast<int>(pass.requests.size()); ++r) {
      const RequestPass& rp = pass.requests[r];
      if (rp.q_len == 0) continue;
      const int rows =
          rows_as_decodes(pass, rp) ? 1 : std::min(rp.q_len, std::max(1, per_task / group));
      const int heads = std::clamp(kQueryVectorsPerTask / (group * rows), 1, heads_cap);
      for (int row = 0; row < rp.q_len; row += rows) {
        const int row_end = std::min(rp.q_len, row + rows);
        for (int h = 0; h < pass.num_kv_heads; h += heads) {
          const int h_end = std::min(pass.num_kv_heads, h + heads);
          tasks.push_back({r, h, h_end, row, row_end});
          cost.push_back(static_cast<int64_t>(row_end - row) * (h_end - h) *
                         (rp.kv_len + kKeyTile));
        }
      }
    }
    if (tasks.size() >= enough_tasks || heads_cap == 1) break;
  }
  // Longest first, so that the last tasks to start are short ones.
  order.resize(tasks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return cost[a] > cost[b]; });

  // The caller's lists, by pointer: a thread_local named in the lambda would be the worker's own.
  const Task* task_list = tasks.data();
  const int* task_order = order.data();
  parallel_for(static_cast<int64_t>(tasks.size()), [&](int64_t i) {
    thread_local Scratch scratch;
    run_attention_task(pass, task_list[task_order[i]], scratch);
  });
}

}  // namespace pagedattn::cpu
