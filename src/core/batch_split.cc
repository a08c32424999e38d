// vLLM's decode/prefill split and batch reorder (vllm/v1/attention/backends/utils.py), result for result.
#include <algorithm>
#include <array>

#include "pagedattn/metadata.h"

namespace pagedattn {
namespace {

int32_t host_i32(const TensorView& t, int64_t i) {
  return t.data_as<const int32_t>()[i * t.stride(0)];
}

}  // namespace

std::vector<int32_t> CommonAttentionMetadata::naive_query_lens() const {
  std::vector<int32_t> lens;
  if (!query_start_loc_cpu.defined() || query_start_loc_cpu.data() == nullptr) return lens;
  const int64_t n = query_start_loc_cpu.size(0) - 1;
  for (int64_t r = 0; r < n; ++r) {
    lens.push_back(host_i32(query_start_loc_cpu, r + 1) - host_i32(query_start_loc_cpu, r));
  }
  return lens;
}

DecodePrefillSplit split_decodes_and_prefills(const CommonAttentionMetadata& meta,
                                              int decode_threshold, bool require_uniform,
                                              bool treat_short_extends_as_decodes) {
  const int num_reqs = meta.num_reqs;
  const int num_tokens = meta.num_actual_tokens;
  const DecodePrefillSplit all_decodes{num_reqs, 0, num_tokens, 0};
  if (meta.max_query_len <= decode_threshold && (!require_uniform || decode_threshold <= 1) &&
      treat_short_extends_as_decodes) {
    return all_decodes;
  }
  const std::vector<int32_t> query_lens = meta.naive_query_lens();
  if (query_lens.empty()) return all_decodes;
  if (query_lens[0] > decode_threshold) return {0, num_reqs, 0, num_tokens};

  std::vector<bool> is_prefill(query_lens.size());
  if (require_uniform) {
    // Padded uniform batches (full CUDA graphs) contain zero-length requests; they count as
    // decodes.
    const bool uniform = std::all_of(query_lens.begin(), query_lens.end(),
                                     [&](int32_t q) { return q == query_lens[0] || q == 0; });
    if (uniform) return all_decodes;
    for (size_t r = 0; r < query_lens.size(); ++r) is_prefill[r] = query_lens[r] != query_lens[0];
  } else {
    for (size_t r = 0; r < query_lens.size(); ++r) is_prefill[r] = query_lens[r] > decode_threshold;
  }
  if (!treat_short_extends_as_decodes && meta.is_prefilling.defined()) {
    for (size_t r = 0; r < is_prefill.size(); ++r) {
      if (meta.is_prefilling.data_as<const uint8_t>()[r * meta.is_prefilling.stride(0)] != 0) {
        is_prefill[r] = true;
      }
    }
  }
  const auto first = std::find(is_prefill.begin(), is_prefill.end(), true);
  if (first == is_prefill.end()) return all_decodes;
  const int first_prefill = static_cast<int>(first - is_prefill.begin());
  const int decode_tokens = host_i32(meta.query_start_loc_cpu, first_prefill);
  return {first_prefill, num_reqs - first_prefill, decode_tokens, num_tokens - decode_tokens};
}

BatchReorder reorder_batch_to_split_decodes_and_prefills(
    const std::vector<ScheduledRequest>& requests, int decode_threshold) {
  const int n = static_cast<int>(requests.size());
  BatchReorder result;
  result.order.resize(n);
  for (int i = 0; i < n; ++i) result.order[i] = i;

  // Regions: 0 decode, 1 short extend (still prefilling), 2 long extend, 3 new prefill.
  std::vector<int> region(n);
  std::array<int, 4> counts{};
  for (int i = 0; i < n; ++i) {
    const ScheduledRequest& r = requests[i];
    if (r.num_computed_tokens == 0) {
      region[i] = 3;
    } else if (r.num_scheduled_tokens > decode_threshold) {
      region[i] = 2;
    } else {
      region[i] = r.num_computed_tokens < r.num_prompt_tokens ? 1 : 0;
    }
    ++counts[region[i]];
  }
  std::vector<int> target;
  for (int g = 0; g < 4; ++g) target.insert(target.end(), counts[g], g);

  // Only misplaced positions move; their sources are those positions sorted stably by region.
  std::vector<int> misplaced;
  for (int i = 0; i < n; ++i) {
    if (region[i] != target[i]) misplaced.push_back(i);
  }
  if (misplaced.empty()) return result;
  std::vector<int> sources = misplaced;
  std::stable_sort(sources.begin(), sources.end(),
                   [&](int a, int b) { return region[a] < region[b]; });
  std::vector<int> dest(n, -1);  // dest[src] = dst; -1 = not in the map
  for (size_t k = 0; k < sources.size(); ++k) dest[sources[k]] = misplaced[k];

  // Resolve each cycle by swaps, in the map's insertion order, as vLLM's swap_states loop does.
  for (int src : sources) {
    int dst = dest[src];
    while (src != dst) {
      std::swap(result.order[src], result.order[dst]);
      const int next = dest[dst] >= 0 ? dest[dst] : dst;
      dest[dst] = dst;
      dst = next;
    }
  }
  result.modified = true;
  return result;
}

}  // namespace pagedattn
