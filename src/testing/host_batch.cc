// Random paged batches on the host, built from a CaseSpec as docs/cases.md describes.
#include "testing/host_batch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>

#include "common/numeric.h"

namespace pagedattn::testing {
namespace {

// Independent, reproducible random streams: each tensor (and each request's K/V) draws from its own
// generator, so a tensor can be regenerated without replaying the others.
enum class Stream : uint64_t { kQuery = 1, kKey = 2, kValue = 3, kBlocks = 4, kSinks = 5 };

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// N(0, 1) by Box-Muller on std::mt19937_64: the same numbers on every platform for a given seed.
class Normal {
 public:
  Normal(uint64_t seed, Stream stream, uint64_t index)
      : rng_(splitmix64(seed ^
                        splitmix64(static_cast<uint64_t>(stream) * 0x100000000ull + index))) {}
  float next() {
    if (has_spare_) {
      has_spare_ = false;
      return static_cast<float>(spare_);
    }
    const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return static_cast<float>(r * std::cos(2.0 * M_PI * u2));
  }
  uint64_t bits() { return rng_(); }

 private:
  double uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  std::mt19937_64 rng_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

float round_to(DType dtype, float x) {
  switch (dtype) {
    case DType::kF16: return f16_bits_to_float(float_to_f16_bits(x));
    case DType::kBF16: return bf16_bits_to_float(float_to_bf16_bits(x));
    default: return x;
  }
}

// Every element of the cache set to the storage format's NaN.
void fill_nan(const TensorView& cache) {
  const int64_t n = cache.numel();
  switch (cache.dtype()) {
    case DType::kF32:
      std::fill_n(cache.data_as<float>(), n, std::numeric_limits<float>::quiet_NaN());
      break;
    case DType::kF16: std::fill_n(cache.data_as<uint16_t>(), n, uint16_t{0x7E00}); break;
    case DType::kBF16: std::fill_n(cache.data_as<uint16_t>(), n, uint16_t{0x7FC0}); break;
    default:
      std::fill_n(cache.data_as<uint8_t>(), n, uint8_t{0x7F});
      break;  // NaN in e4m3 and e5m2
  }
}

int64_t blocks_for(int tokens, int block_size) {
  return (tokens + block_size - 1) / block_size;
}

}  // namespace

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape) {
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  bytes_.resize(static_cast<size_t>(numel) * dtype_size(dtype));
  view_ = TensorView(bytes_.data(), dtype, Device::cpu(), std::span<const int64_t>(shape));
}

CommonAttentionMetadata HostBatch::metadata() const {
  CommonAttentionMetadata meta;
  meta.query_start_loc = query_start_loc.view();
  meta.query_start_loc_cpu = query_start_loc.view();
  meta.seq_lens = seq_lens.view();
  meta.seq_lens_cpu = seq_lens.view();
  meta.num_reqs = spec.num_reqs();
  meta.num_actual_tokens = static_cast<int>(spec.num_tokens());
  meta.max_query_len = *std::max_element(spec.query_lens.begin(), spec.query_lens.end());
  meta.max_seq_len = *std::max_element(spec.seq_lens.begin(), spec.seq_lens.end());
  meta.block_table_tensor = block_table.view();
  meta.slot_mapping = slot_mapping.view();
  meta.causal = spec.causal;
  return meta;
}

StatusOr<HostBatch> make_host_batch(const CaseSpec& spec, KVCacheLayout layout) {
  PAGEDATTN_RETURN_IF_ERROR(spec.validate());
  const int num_reqs = spec.num_reqs();
  const int64_t num_tokens = spec.num_tokens();
  const int hq = spec.num_heads, hkv = spec.num_kv_heads, d = spec.head_size, bs = spec.block_size;
  const bool fp8 = is_fp8(spec.kv_cache_dtype);

  HostBatch b;
  b.spec = spec;
  b.layout = layout;

  // Lengths.
  b.seq_lens = HostTensor(DType::kI32, {num_reqs});
  b.query_start_loc = HostTensor(DType::kI32, {num_reqs + 1});
  b.query_start_loc.data<int32_t>()[0] = 0;
  for (int r = 0; r < num_reqs; ++r) {
    b.seq_lens.data<int32_t>()[r] = spec.seq_lens[r];
    b.query_start_loc.data<int32_t>()[r + 1] =
        b.query_start_loc.data<int32_t>()[r] + spec.query_lens[r];
  }

  // Blocks: the shared prefix's blocks once, then each request's own; physical ids shuffled.
  const int64_t shared = spec.common_prefix_len / bs;
  int64_t needed = shared, max_blocks = 1;
  for (int r = 0; r < num_reqs; ++r) {
    const int64_t n = blocks_for(spec.seq_lens[r], bs);
    needed += std::max<int64_t>(0, n - shared);
    max_blocks = std::max(max_blocks, n);
  }
  b.num_blocks = spec.num_blocks.value_or(needed + 3);
  if (b.num_blocks < needed) {
    return invalid_argument("num_blocks = " + std::to_string(b.num_blocks) +
                            " is too small: this batch needs " + std::to_string(needed) +
                            " blocks");
  }
  std::vector<int32_t> ids(static_cast<size_t>(b.num_blocks));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  Normal block_rng(spec.seed, Stream::kBlocks, 0);
  for (size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[block_rng.bits() % i]);
  b.block_table = HostTensor(DType::kI32, {num_reqs, max_blocks});
  int32_t* table = b.block_table.data<int32_t>();
  std::fill_n(table, num_reqs * max_blocks, 0);
  int64_t next = shared;
  for (int r = 0; r < num_reqs; ++r) {
    const int64_t n = blocks_for(spec.seq_lens[r], bs);
    for (int64_t k = 0; k < n; ++k) table[r * max_blocks + k] = k < shared ? ids[k] : ids[next++];
  }

  // Slots of the new tokens.
  b.slot_mapping = HostTensor(DType::kI64, {num_tokens});
  for (int r = 0, t = 0; r < num_reqs; ++r) {
    const int context = spec.seq_lens[r] - spec.query_lens[r];
    for (int i = 0; i < spec.query_lens[r]; ++i, ++t) {
      const int p = context + i;
      b.slot_mapping.data<int64_t>()[t] = int64_t{table[r * max_blocks + p / bs]} * bs + p % bs;
    }
  }

  // Queries.
  b.query = HostTensor(spec.dtype, {num_tokens, hq, d});
  {
    Normal rng(spec.seed, Stream::kQuery, 0);
    void* q = b.query.view().data();
    for (int64_t i = 0; i < num_tokens * hq * d; ++i)
      store_from_float(q, spec.dtype, i, rng.next());
  }

  // K and V of every token. Request r draws tokens [start, seq_len) from its own stream, where the
  // shared prefix belongs to request 0 only (its blocks are the same memory for everyone). Requests
  // run on all hardware threads (a 64 x 4096 decode draws half a billion numbers): each has its own
  // stream and writes only its own tokens and blocks, so the result does not depend on the threads.
  const int threads =
      std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, std::max(1, num_reqs));
  auto for_each_token = [&](Stream stream, auto&& visit) {
    auto requests_from = [&](int first) {
      std::vector<float> row(static_cast<size_t>(hkv) * d);
      for (int r = first; r < num_reqs; r += threads) {
        Normal rng(spec.seed, stream, static_cast<uint64_t>(r));
        for (int j = r == 0 ? 0 : spec.common_prefix_len; j < spec.seq_lens[r]; ++j) {
          for (float& x : row) x = round_to(spec.dtype, rng.next());
          visit(r, j, row);
        }
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(requests_from, t);
    requests_from(0);
    for (std::thread& t : pool) t.join();
  };

  // FP8 scales from the data (amax / 64), per tensor or per KV head.
  const int num_scales = fp8 && spec.kv_scale_per_head ? hkv : 1;
  b.k_scale = HostTensor(DType::kF32, {num_scales});
  b.v_scale = HostTensor(DType::kF32, {num_scales});
  for (int plane = 0; plane < 2; ++plane) {
    float* scale = (plane == 0 ? b.k_scale : b.v_scale).data<float>();
    std::fill_n(scale, num_scales, 1.0f);
    if (!fp8) continue;
    // Per request (requests run in parallel), then reduced.
    std::vector<float> req_amax(static_cast<size_t>(num_reqs) * hkv, 0.0f);
    for_each_token(plane == 0 ? Stream::kKey : Stream::kValue,
                   [&](int r, int, const std::vector<float>& row) {
                     float* amax = req_amax.data() + static_cast<size_t>(r) * hkv;
                     for (int h = 0; h < hkv; ++h) {
                       for (int e = 0; e < d; ++e)
                         amax[h] = std::max(amax[h], std::fabs(row[h * d + e]));
                     }
                   });
    std::vector<float> amax(static_cast<size_t>(hkv), 0.0f);
    for (int r = 0; r < num_reqs; ++r) {
      for (int h = 0; h < hkv; ++h) amax[h] = std::max(amax[h], req_amax[r * hkv + h]);
    }
    if (num_scales == 1) amax[0] = *std::max_element(amax.begin(), amax.end());
    for (int s = 0; s < num_scales; ++s) scale[s] = amax[s] > 0.0f ? amax[s] / 64.0f : 1.0f;
  }

  // The cache: NaN everywhere, then the context tokens; the new tokens go to key/value only.
  const DType storage = kv_cache_storage_dtype(spec.kv_cache_dtype, spec.dtype);
  PAGEDATTN_ASSIGN_OR_RETURN(KVCacheShape shape,
                             get_kv_cache_shape(b.num_blocks, bs, hkv, d, spec.kv_cache_dtype));
  PAGEDATTN_ASSIGN_OR_RETURN(b.kv_cache,
                             KVCacheAllocation::allocate(shape, storage, layout, Device::cpu()));
  const TensorView& cache = b.kv_cache.view();
  fill_nan(cache);
  b.key = HostTensor(spec.dtype, {num_tokens, hkv, d});
  b.value = HostTensor(spec.dtype, {num_tokens, hkv, d});
  for (int plane = 0; plane < 2; ++plane) {
    const float* scale = (plane == 0 ? b.k_scale : b.v_scale).data<float>();
    void* fresh = (plane == 0 ? b.key : b.value).view().data();
    for_each_token(plane == 0 ? Stream::kKey : Stream::kValue, [&](int r, int j,
                                                                   const std::vector<float>& row) {
      const int context = spec.seq_lens[r] - spec.query_lens[r];
      if (j >= context) {
        const int64_t t = b.query_start_loc.data<int32_t>()[r] + (j - context);
        for (int64_t e = 0; e < hkv * d; ++e) {
          store_from_float(fresh, spec.dtype, t * hkv * d + e, row[e]);
        }
        return;
      }
      const int64_t base = table[r * max_blocks + j / bs] * cache.stride(0) +
                           plane * cache.stride(1) + (j % bs) * cache.stride(2);
      for (int h = 0; h < hkv; ++h) {
        const float s = scale[num_scales == 1 ? 0 : h];
        for (int e = 0; e < d; ++e) {
          const float x = row[h * d + e];
          store_from_float(cache.data(), storage, base + h * cache.stride(3) + e * cache.stride(4),
                           fp8 ? x / s : x);
        }
      }
    });
  }

  b.params = impl_params(attention_layer_for(spec, layout, Device::cpu()));
  return b;
}

AttentionLayer attention_layer_for(const CaseSpec& spec, KVCacheLayout layout,
                                   const Device& device) {
  AttentionLayer layer;
  layer.num_heads = spec.num_heads;
  layer.num_kv_heads = spec.num_kv_heads;
  layer.head_size = spec.head_size;
  layer.block_size = spec.block_size;
  layer.dtype = spec.dtype;
  layer.kv_cache_dtype = spec.kv_cache_dtype;
  layer.kv_layout = layout;
  layer.scale = static_cast<float>(
      spec.scale.value_or(1.0 / std::sqrt(static_cast<double>(spec.head_size))));
  if (spec.sliding_window) layer.sliding_window = *spec.sliding_window;
  layer.logits_soft_cap = static_cast<float>(spec.logits_soft_cap);
  if (spec.alibi) layer.alibi_slopes = alibi_slopes(spec.num_heads);
  if (spec.sinks) {
    Normal rng(spec.seed, Stream::kSinks, 0);
    for (int h = 0; h < spec.num_heads; ++h) layer.sinks.push_back(rng.next());
  }
  layer.per_head_kv_scales = is_fp8(spec.kv_cache_dtype) && spec.kv_scale_per_head;
  layer.device = device;
  return layer;
}

}  // namespace pagedattn::testing
