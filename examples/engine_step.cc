// The engine-side call sequence of one attention layer over two scheduling steps (a prefill, then a
// decode), using only the installed public API:
//   select_backend -> KV-cache shape and allocation -> make_builder / make_impl, then per step
//   CommonAttentionMetadata -> builder.build -> impl.do_kv_cache_update -> impl.forward.
// It runs on the CPU with float32 tensors so that it needs no GPU and no conversion helpers, and it
// checks the decode step against a few lines of naive attention.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "pagedattn/pagedattn.h"

namespace pa = pagedattn;

namespace {

constexpr int kHeads = 8, kKvHeads = 2, kHeadSize = 64, kBlockSize = 16, kNumBlocks = 8;

int fail(const pa::Status& status) {
  std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
  return 1;
}

pa::TensorView view(std::vector<float>& v, std::initializer_list<int64_t> shape) {
  return pa::TensorView(v.data(), pa::DType::kF32, pa::Device::cpu(), shape);
}

}  // namespace

int main() {
  // 1. The model's attention layer; ask the selector which backend serves it here (CPU).
  pa::AttentionLayer layer;
  layer.num_heads = kHeads;
  layer.num_kv_heads = kKvHeads;
  layer.head_size = kHeadSize;
  layer.block_size = kBlockSize;
  layer.dtype = pa::DType::kF32;
  layer.device = pa::Device::cpu();
  pa::StatusOr<pa::BackendSelection> selection = pa::select_backend(pa::selector_config(layer));
  if (!selection.ok()) return fail(selection.status());
  const pa::AttentionBackend& backend = *selection->backend;
  std::printf("backend: %s, layout %s\n", std::string(backend.name()).c_str(),
              std::string(pa::kv_cache_layout_name(selection->kv_cache_layout)).c_str());

  // 2. Allocate one layer's paged KV cache with the backend's shape and layout.
  auto shape = backend.get_kv_cache_shape(kNumBlocks, kBlockSize, kKvHeads, kHeadSize,
                                          pa::KVCacheDType::kAuto);
  if (!shape.ok()) return fail(shape.status());
  auto cache = pa::KVCacheAllocation::allocate(*shape, pa::DType::kF32, selection->kv_cache_layout,
                                               pa::Device::cpu());
  if (!cache.ok()) return fail(cache.status());

  // 3. One metadata builder per KV-cache group, one impl per layer.
  //    (An engine sets the builder's limits, max_num_reqs etc., from its scheduler config.)
  layer.kv_layout = selection->kv_cache_layout;
  auto builder = backend.make_builder(pa::builder_params(layer));
  if (!builder.ok()) return fail(builder.status());
  auto impl = backend.make_impl(pa::impl_params(layer));
  if (!impl.ok()) return fail(impl.status());

  // Two requests; request r owns blocks block_table[r]. The engine's block manager picks these.
  std::vector<int32_t> block_table = {5, 2, 7, 0};  // [2 requests, 2 blocks]
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> all_k(2), all_v(2);  // every token's K/V, for the check below

  // 4. Two steps: prefill 20 and 9 prompt tokens, then decode one token each.
  const std::vector<std::vector<int32_t>> step_seq_lens = {{20, 9}, {21, 10}};
  const std::vector<std::vector<int32_t>> step_query_lens = {{20, 9}, {1, 1}};
  std::vector<float> output;
  std::vector<float> query;
  for (int step = 0; step < 2; ++step) {
    std::vector<int32_t> seq_lens = step_seq_lens[step], qsl = {0};
    std::vector<int64_t> slots;
    for (int r = 0; r < 2; ++r) {
      qsl.push_back(qsl.back() + step_query_lens[step][r]);
      for (int p = seq_lens[r] - step_query_lens[step][r]; p < seq_lens[r]; ++p) {
        slots.push_back(int64_t{block_table[r * 2 + p / kBlockSize]} * kBlockSize + p % kBlockSize);
      }
    }
    const int64_t tokens = qsl.back();
    query.assign(tokens * kHeads * kHeadSize, 0.0f);
    std::vector<float> key(tokens * kKvHeads * kHeadSize), value(key.size());
    for (float& x : query) x = normal(rng);
    for (float& x : key) x = normal(rng);
    for (float& x : value) x = normal(rng);
    for (int r = 0; r < 2; ++r) {
      const size_t row = kKvHeads * kHeadSize;
      all_k[r].insert(all_k[r].end(), key.begin() + qsl[r] * row, key.begin() + qsl[r + 1] * row);
      all_v[r].insert(all_v[r].end(), value.begin() + qsl[r] * row,
                      value.begin() + qsl[r + 1] * row);
    }
    output.assign(query.size(), NAN);

    pa::CommonAttentionMetadata meta;
    meta.query_start_loc = meta.query_start_loc_cpu =
        pa::TensorView(qsl.data(), pa::DType::kI32, pa::Device::cpu(), {3});
    meta.seq_lens = meta.seq_lens_cpu =
        pa::TensorView(seq_lens.data(), pa::DType::kI32, pa::Device::cpu(), {2});
    meta.num_reqs = 2;
    meta.num_actual_tokens = static_cast<int>(tokens);
    meta.max_query_len = std::max(step_query_lens[step][0], step_query_lens[step][1]);
    meta.max_seq_len = std::max(seq_lens[0], seq_lens[1]);
    meta.block_table_tensor =
        pa::TensorView(block_table.data(), pa::DType::kI32, pa::Device::cpu(), {2, 2});
    meta.slot_mapping = pa::TensorView(slots.data(), pa::DType::kI64, pa::Device::cpu(), {tokens});
    if (pa::Status s = meta.validate(kBlockSize, kNumBlocks); !s.ok()) return fail(s);

    // Once per step: the backend's metadata. Then per layer: write the new K/V, run attention.
    auto metadata = (*builder)->build(/*common_prefix_len=*/0, meta);
    if (!metadata.ok()) return fail(metadata.status());
    auto k = view(key, {tokens, kKvHeads, kHeadSize}),
         v = view(value, {tokens, kKvHeads, kHeadSize});
    if (pa::Status s = (*impl)->do_kv_cache_update(k, v, cache->view(), meta.slot_mapping, {});
        !s.ok()) {
      return fail(s);
    }
    if (pa::Status s =
            (*impl)->forward(view(query, {tokens, kHeads, kHeadSize}), k, v, cache->view(),
                             **metadata, view(output, {tokens, kHeads, kHeadSize}), {}, {});
        !s.ok()) {
      return fail(s);
    }
    std::printf("step %d: %lld tokens for 2 requests (seq_lens %d, %d)\n", step,
                static_cast<long long>(tokens), seq_lens[0], seq_lens[1]);
  }

  // 5. The decode step by hand: token r attends to all of request r's keys.
  double max_error = 0.0;
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadSize));
  for (int r = 0; r < 2; ++r) {
    const int len = step_seq_lens[1][r];
    for (int h = 0; h < kHeads; ++h) {
      const int kvh = h / (kHeads / kKvHeads);
      const float* q = &query[(r * kHeads + h) * kHeadSize];
      std::vector<double> p(len);
      double max_s = -INFINITY, sum = 0.0;
      for (int j = 0; j < len; ++j) {
        double s = 0.0;
        for (int d = 0; d < kHeadSize; ++d)
          s += q[d] * all_k[r][(j * kKvHeads + kvh) * kHeadSize + d];
        p[j] = s * scale;
        max_s = std::max(max_s, p[j]);
      }
      for (double& x : p) sum += (x = std::exp(x - max_s));
      for (int d = 0; d < kHeadSize; ++d) {
        double o = 0.0;
        for (int j = 0; j < len; ++j) o += p[j] * all_v[r][(j * kKvHeads + kvh) * kHeadSize + d];
        max_error =
            std::max(max_error, std::fabs(o / sum - output[(r * kHeads + h) * kHeadSize + d]));
      }
    }
  }
  std::printf("decode step vs naive attention: max abs error %.2e %s\n", max_error,
              max_error < 1e-4 ? "PASS" : "FAIL");
  return max_error < 1e-4 ? 0 : 1;
}
