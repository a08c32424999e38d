// Test harness for the paged attention kernel: builds a random paged batch (make_host_batch),
// writes the new tokens into the cache the way the cache-write kernel would (or, for the ragged
// source, passes them to the kernel instead), runs the kernel on the device with poisoned outputs
// and compares with the float64 oracle.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/numeric.h"
#include "kernels/attention/paged_attention.h"
#include "reference/attention_ref.h"
#include "reference/compare.h"
#include "testing/batch_params.h"
#include "testing/host_batch.h"

namespace pagedattn::test {

// Device memory owned by a test.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0 && cudaMalloc(&ptr_, bytes) != cudaSuccess) ptr_ = nullptr;
  }
  DeviceBuffer(const void* host, size_t bytes) : DeviceBuffer(bytes) {
    if (ptr_ != nullptr) cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr_); }
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  void poison() const { cudaMemset(ptr_, 0xFF, bytes_); }  // NaN in every float format

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct SplitOptions {
  int max_num_splits = 1;
  std::vector<int> per_req;     // empty: every request uses max_num_splits
  int extra_max_query_len = 0;  // added to max_query_len (graph capture passes an upper bound)
};

// The ragged source (PagedAttentionParams::k_new/v_new) in run_paged_case: the kernel gets the
// new tokens' K/V, and the cache slots of the requests that read them (no context) keep
// make_host_batch's NaN, so only the ragged source gives the oracle's result for them.
struct RaggedSource {
  bool enabled = false;
  int token_pad = 0;       // NaN elements after each token's K/V row (a multiple of 8)
  bool with_cache = true;  // false: kv_cache nullptr (no request may have context)
};

struct RunResult {
  reference::Comparison cmp;
  std::vector<uint16_t> out;  // raw output bits
};

// Where the device cache's V planes lie: beside K, as the host batch holds them (v_offset 0), or
// as two allocations would place them: V's blocks v_offset elements from K's (either side, any
// distance that does not overlap them). Then each block's K plane is followed by the next block's,
// and 2^31 NaN elements lie before both: an element offset that wraps in 32 bits reads NaN inside
// the allocation (a wrong output) instead of faulting.
struct CachePlacement {
  int64_t v_offset = 0;
};

// The device cache of a host batch, placed as asked; strides in elements (block, token, head) of
// each plane.
struct DeviceCache {
  DeviceBuffer buffer;
  const char* k = nullptr;
  const char* v = nullptr;
  int64_t strides[3] = {};

  DeviceCache(const TensorView& host, const CachePlacement& placement) {
    const int64_t esize = dtype_size(host.dtype());
    strides[0] = host.stride(0), strides[1] = host.stride(2), strides[2] = host.stride(3);
    if (placement.v_offset == 0) {
      buffer = DeviceBuffer(host.data(), host.nbytes());
      k = buffer.as<char>();
      v = k + host.stride(1) * esize;
      return;
    }
    const int64_t blocks = host.size(0), plane = host.stride(1), span = blocks * plane;
    const int64_t guard = int64_t{1} << 31, offset = placement.v_offset;
    EXPECT_GE(offset < 0 ? -offset : offset, span) << "V planes would overlap K planes";
    const int64_t low = offset < 0 ? offset : 0, high = (offset > 0 ? offset : 0) + span;
    buffer = DeviceBuffer(static_cast<size_t>((guard + high - low) * esize));
    EXPECT_NE(buffer.get(), nullptr) << "cannot allocate the far-apart cache";
    if (buffer.get() == nullptr) return;
    buffer.poison();
    k = buffer.as<char>() + (guard - low) * esize;
    v = k + offset * esize;
    strides[0] = plane;
    const char* src = static_cast<const char*>(host.data());
    for (int64_t blk = 0; blk < blocks; ++blk) {
      for (int kv = 0; kv < 2; ++kv) {
        cudaMemcpy(const_cast<char*>(kv == 0 ? k : v) + blk * plane * esize,
                   src + (blk * host.stride(0) + kv * host.stride(1)) * esize, plane * esize,
                   cudaMemcpyHostToDevice);
      }
    }
  }
};

// A host batch's operands on the device, as both kernel families read them: the query, the cache
// (as the host batch holds it now, placed as asked), the block table, the scales, ALiBi slopes
// and sinks, and the output and LSE, poisoned.
struct DeviceBatch {
  const testing::HostBatch& b;
  DeviceBuffer q;
  DeviceCache kv;
  DeviceBuffer table, ks, vs, alibi, sinks, out, lse;

  explicit DeviceBatch(const testing::HostBatch& batch, const CachePlacement& placement = {})
      : b(batch),
        q(b.query.view().data(), b.query.view().nbytes()),
        kv(b.kv_cache.view(), placement),
        table(b.block_table.view().data(), b.block_table.view().nbytes()),
        ks(b.k_scale.view().data(), b.k_scale.view().nbytes()),
        vs(b.v_scale.view().data(), b.v_scale.view().nbytes()),
        out(out_bytes()),
        lse(static_cast<size_t>(b.spec.num_heads) * tokens() * 4) {
    const size_t hq = static_cast<size_t>(b.spec.num_heads);
    if (!b.params.alibi_slopes.empty()) alibi = DeviceBuffer(b.params.alibi_slopes.data(), hq * 4);
    if (!b.params.sinks.empty()) sinks = DeviceBuffer(b.params.sinks.data(), hq * 4);
    out.poison();
    lse.poison();
  }
  int tokens() const { return static_cast<int>(b.spec.num_tokens()); }
  size_t out_bytes() const {
    return static_cast<size_t>(tokens()) * b.spec.num_heads * b.spec.head_size * 2;
  }

  // The fields PagedAttentionParams and DecodeAttentionParams share.
  template <typename Params>
  void fill(Params& p) const {
    const testing::CaseSpec& spec = b.spec;
    const TensorView& cache = b.kv_cache.view();
    const int hq = spec.num_heads, d = spec.head_size;
    p.q = q.get();
    p.q_token_stride = static_cast<int64_t>(hq) * d;
    p.q_head_stride = d;
    p.q_dtype = spec.dtype;
    p.k_cache = kv.k;
    p.v_cache = kv.v;
    p.cache_dtype = cache.dtype();
    p.cache_block_stride = kv.strides[0];
    p.cache_token_stride = kv.strides[1];
    p.cache_head_stride = kv.strides[2];
    p.k_scale = ks.as<float>();
    p.v_scale = vs.as<float>();
    p.per_head_scales = b.k_scale.view().size(0) > 1;
    p.block_table = table.as<int32_t>();
    p.block_table_stride = b.block_table.view().size(1);
    p.num_heads = hq;
    p.num_kv_heads = spec.num_kv_heads;
    p.head_size = d;
    p.block_size = spec.block_size;
    p.scale = b.params.resolved_scale();
    p.softcap = b.params.logits_soft_cap;
    p.alibi_slopes = alibi.as<float>();
    p.sinks = sinks.as<float>();
    p.window_left = b.params.sliding_window.left;
    p.out = out.get();
    p.out_token_stride = static_cast<int64_t>(hq) * d;
    p.out_head_stride = d;
    p.lse = lse.as<float>();
    p.lse_head_stride = tokens();
  }

  // The output (its raw bits into `out_bits`) and LSE against the oracle's.
  reference::Comparison compare(const reference::ReferenceOutputs& ref,
                                std::vector<uint16_t>& out_bits) const {
    const int T = tokens(), hq = b.spec.num_heads, d = b.spec.head_size;
    out_bits.resize(out_bytes() / 2);
    std::vector<float> lse_host(static_cast<size_t>(hq) * T);
    cudaMemcpy(out_bits.data(), out.get(), out_bytes(), cudaMemcpyDeviceToHost);
    cudaMemcpy(lse_host.data(), lse.get(), lse_host.size() * 4, cudaMemcpyDeviceToHost);
    TensorView out_view(out_bits.data(), b.spec.dtype, Device::cpu(), {T, hq, d});
    TensorView lse_view(lse_host.data(), DType::kF32, Device::cpu(), {hq, T});
    return reference::compare_to_reference(out_view, lse_view, ref.out, ref.lse,
                                           reference::tolerance_for(b.spec.dtype));
  }
};

// Writes the new tokens' K/V (key/value) into the host cache at slot_mapping, FP8-encoded with
// the scales where the cache is FP8.
inline void write_new_tokens(testing::HostBatch& b) {
  const TensorView& cache = b.kv_cache.view();
  const int hkv = b.spec.num_kv_heads, d = b.spec.head_size, bs = b.spec.block_size;
  const bool fp8 = is_fp8(cache.dtype());
  const int num_scales = static_cast<int>(b.k_scale.view().size(0));
  for (int64_t t = 0; t < b.spec.num_tokens(); ++t) {
    const int64_t slot = b.slot_mapping.data<int64_t>()[t];
    if (slot < 0) continue;
    for (int plane = 0; plane < 2; ++plane) {
      const testing::HostTensor& src = plane == 0 ? b.key : b.value;
      const float* scale = (plane == 0 ? b.k_scale : b.v_scale).data<float>();
      for (int h = 0; h < hkv; ++h) {
        const float s = scale[num_scales == 1 ? 0 : h];
        for (int e = 0; e < d; ++e) {
          const float x = load_as_float(src.view().data(), b.spec.dtype, (t * hkv + h) * d + e);
          const int64_t at = (slot / bs) * cache.stride(0) + plane * cache.stride(1) +
                             (slot % bs) * cache.stride(2) + h * cache.stride(3) +
                             e * cache.stride(4);
          store_from_float(cache.data(), cache.dtype(), at, fp8 ? x / s : x);
        }
      }
    }
  }
}

// A request the ragged source serves: its keys are exactly its new tokens.
inline bool without_context(const testing::CaseSpec& s, int r) {
  return s.query_lens[r] > 0 && s.seq_lens[r] == s.query_lens[r];
}

// Writes the new tokens of requests with context only (their slots -1 meanwhile); the others'
// slots must still be NaN, or the ragged test could not fail. Returns how many were left out.
inline int write_new_tokens_with_context(testing::HostBatch& b) {
  const testing::CaseSpec& s = b.spec;
  int64_t* slots = b.slot_mapping.data<int64_t>();
  const std::vector<int64_t> saved(slots, slots + s.num_tokens());
  const TensorView& cache = b.kv_cache.view();
  int left_out = 0;
  for (int r = 0; r < s.num_reqs(); ++r) {
    if (!without_context(s, r)) continue;
    ++left_out;
    const int32_t* qsl = b.query_start_loc.data<int32_t>();
    for (int64_t t = qsl[r]; t < qsl[r + 1]; ++t) {
      const int64_t at =
          (slots[t] / s.block_size) * cache.stride(0) + (slots[t] % s.block_size) * cache.stride(2);
      EXPECT_TRUE(std::isnan(load_as_float(cache.data(), cache.dtype(), at))) << s.name;
      slots[t] = -1;
    }
  }
  write_new_tokens(b);
  std::copy(saved.begin(), saved.end(), slots);
  return left_out;
}

// The new tokens' K or V as the kernel reads them: token rows of Hkv * D + pad elements, NaN pad.
inline DeviceBuffer upload_new_tokens(const testing::HostTensor& src, const testing::CaseSpec& s,
                                      int pad) {
  const size_t row = static_cast<size_t>(s.num_kv_heads) * s.head_size * 2;
  const size_t padded = row + static_cast<size_t>(pad) * 2;
  std::vector<uint8_t> host(padded * s.num_tokens(), 0xFF);
  for (int64_t t = 0; t < s.num_tokens(); ++t) {
    std::memcpy(host.data() + t * padded, static_cast<const uint8_t*>(src.view().data()) + t * row,
                row);
  }
  return DeviceBuffer(host.data(), host.size());
}

using PagedAttentionLauncher = Status (*)(const kernels::PagedAttentionParams&, void* stream);

// Runs the case through the kernel (or another launcher with the same contract), with the
// ragged source where asked, and compares with the oracle. Fails the test on errors.
inline RunResult run_paged_case(const testing::CaseSpec& spec, KVCacheLayout layout,
                                const SplitOptions& splits = {},
                                PagedAttentionLauncher launch = kernels::launch_paged_attention,
                                const RaggedSource& ragged = {},
                                const CachePlacement& placement = {}) {
  RunResult result;
  auto batch_or = testing::make_host_batch(spec, layout);
  EXPECT_TRUE(batch_or.ok()) << batch_or.status().to_string();
  if (!batch_or.ok()) return result;
  testing::HostBatch& b = batch_or.value();
  // With the ragged source the device's cache lacks the new tokens of requests without context;
  // the oracle's has every new token.
  if (ragged.enabled) {
    EXPECT_GT(write_new_tokens_with_context(b), 0) << spec.name << ": no request reads k_new";
  } else {
    write_new_tokens(b);
  }
  const DeviceBatch dev(b, placement);
  if (ragged.enabled) write_new_tokens(b);

  auto ref =
      reference::reference_attention(testing::reference_inputs(b, b.kv_cache.view()), b.params);
  EXPECT_TRUE(ref.ok()) << ref.status().to_string();
  if (!ref.ok()) return result;

  const int T = dev.tokens(), hq = spec.num_heads, d = spec.head_size;
  const int num_reqs = spec.num_reqs();
  DeviceBuffer seq(b.seq_lens.view().data(), b.seq_lens.view().nbytes());
  DeviceBuffer cu(b.query_start_loc.view().data(), b.query_start_loc.view().nbytes());
  DeviceBuffer nsplit;
  if (!splits.per_req.empty()) nsplit = DeviceBuffer(splits.per_req.data(), num_reqs * 4);
  DeviceBuffer split_out(static_cast<size_t>(splits.max_num_splits) * T * hq * d * 4);
  DeviceBuffer split_lse(static_cast<size_t>(splits.max_num_splits) * hq * T * 4);
  split_out.poison();
  split_lse.poison();

  kernels::PagedAttentionParams p;
  dev.fill(p);
  p.cu_seqlens_q = cu.as<int32_t>();
  p.seqused_k = seq.as<int32_t>();
  p.num_reqs = num_reqs;
  p.num_tokens = T;
  for (int r = 0; r < num_reqs; ++r) {
    p.max_query_len = std::max(p.max_query_len, spec.query_lens[r]);
    p.max_seq_len = std::max(p.max_seq_len, spec.seq_lens[r]);
  }
  p.max_query_len += splits.extra_max_query_len;
  p.window_right = b.params.sliding_window.right;
  p.causal = spec.causal;
  p.max_num_splits = splits.max_num_splits;
  p.num_splits_per_req = nsplit.as<int32_t>();
  p.split_out = split_out.as<float>();
  p.split_lse = split_lse.as<float>();
  DeviceBuffer k_new, v_new;
  if (ragged.enabled) {
    k_new = upload_new_tokens(b.key, spec, ragged.token_pad);
    v_new = upload_new_tokens(b.value, spec, ragged.token_pad);
    p.k_new = k_new.get();
    p.v_new = v_new.get();
    p.new_token_stride = static_cast<int64_t>(spec.num_kv_heads) * d + ragged.token_pad;
    p.new_head_stride = d;
    if (!ragged.with_cache) {
      p.k_cache = p.v_cache = nullptr;
      p.block_table = nullptr;
      p.cache_dtype = spec.dtype;
    }
  }

  const Status st = launch(p, nullptr);
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  result.cmp = dev.compare(*ref, result.out);
  return result;
}

// run_paged_case through `launch`, failing the test with the case's name, `grid` (which launch) and
// the errors where the output misses the oracle.
inline void expect_pass_with(const testing::CaseSpec& c, KVCacheLayout layout,
                             PagedAttentionLauncher launch, const char* grid,
                             const SplitOptions& splits = {}) {
  const RunResult r = run_paged_case(c, layout, splits, launch);
  EXPECT_TRUE(r.cmp.pass) << c.name << " (" << grid << "): " << r.cmp;
}

}  // namespace pagedattn::test
