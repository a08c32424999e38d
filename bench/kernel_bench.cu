// Timing of the paged attention kernel alone (no backend) on the issue-4 shapes: prints one
// "BENCH" line per shape. Inputs are random (never zeros), block ids shuffled; times are medians
// of CUDA-event-timed launches. Exit status 1 when a launch fails; without a CUDA device it says
// so and exits 0. PAGEDATTN_BENCH_PREFILL_ONLY=1 stops after the prefill shapes (profiling).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention/paged_attention.h"

namespace pagedattn::bench {
namespace {

bool g_failed = false;  // a launch failed: main's exit status says so

void check(bool ok, const char* what, const std::string& detail) {
  if (ok) return;
  std::fprintf(stderr, "error: %s: %s\n", what, detail.c_str());
  g_failed = true;
}

__global__ void fill_random_bf16(__nv_bfloat16* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16((static_cast<float>(h & 0xFFFF) / 65536.0f - 0.5f) * 4.0f);
  }
}

struct Shape {
  std::vector<int> q_lens, seq_lens;
  int hq = 32, hkv = 8, d = 128, block = 16;
  bool causal = true;
  int splits = 1;
  int window_left = -1;  // sliding window (decode shapes only: bytes count the visible keys)
  bool hnd = false;      // cache layout; NHD otherwise
  bool ragged = false;   // pass the new tokens' K/V: requests without context read them
};

struct Timing {
  double ms;
  double kv_bytes;
  double flops;
};

template <typename T>
T* dev_copy(const std::vector<T>& v) {
  T* p = nullptr;
  cudaMalloc(&p, v.size() * sizeof(T));
  cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return p;
}

Timing time_shape(const Shape& s) {
  const int num_reqs = static_cast<int>(s.q_lens.size());
  std::vector<int> cu(num_reqs + 1, 0);
  int max_blocks = 0, max_q = 0, max_seq = 0;
  double kv_bytes = 0, flops = 0;
  for (int r = 0; r < num_reqs; ++r) {
    cu[r + 1] = cu[r] + s.q_lens[r];
    max_blocks = std::max(max_blocks, (s.seq_lens[r] + s.block - 1) / s.block);
    max_q = std::max(max_q, s.q_lens[r]);
    max_seq = std::max(max_seq, s.seq_lens[r]);
    const double read =
        s.window_left >= 0 ? std::min(s.seq_lens[r], s.window_left + s.q_lens[r]) : s.seq_lens[r];
    kv_bytes += 2.0 * read * s.hkv * s.d * 2;
    const double ctx = s.seq_lens[r] - s.q_lens[r];
    const double avg_keys = s.window_left >= 0 ? read
                            : s.causal         ? ctx + (s.q_lens[r] + 1) / 2.0
                                               : s.seq_lens[r];
    flops += 4.0 * s.q_lens[r] * avg_keys * s.hq * s.d;
  }
  const int tokens = cu[num_reqs];
  const int num_blocks = num_reqs * max_blocks;
  std::vector<int> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
  std::vector<int> table(ids);  // request r owns blocks [r * max_blocks, (r + 1) * max_blocks)

  const int64_t q_elems = static_cast<int64_t>(tokens) * s.hq * s.d;
  const int64_t cache_elems = static_cast<int64_t>(num_blocks) * 2 * s.block * s.hkv * s.d;
  __nv_bfloat16 *q, *cache, *out;
  float *lse, *split_out = nullptr, *split_lse = nullptr;
  cudaMalloc(&q, q_elems * 2);
  cudaMalloc(&out, q_elems * 2);
  cudaMalloc(&cache, cache_elems * 2);
  cudaMalloc(&lse, static_cast<int64_t>(tokens) * s.hq * 4);
  if (s.splits > 1) {
    cudaMalloc(&split_out, q_elems * 4 * s.splits);
    cudaMalloc(&split_lse, static_cast<int64_t>(tokens) * s.hq * 4 * s.splits);
  }
  fill_random_bf16<<<1024, 256>>>(q, q_elems, 1);
  fill_random_bf16<<<4096, 256>>>(cache, cache_elems, 2);
  __nv_bfloat16 *k_new = nullptr, *v_new = nullptr;
  if (s.ragged) {
    const int64_t new_elems = static_cast<int64_t>(tokens) * s.hkv * s.d;
    cudaMalloc(&k_new, new_elems * 2);
    cudaMalloc(&v_new, new_elems * 2);
    fill_random_bf16<<<1024, 256>>>(k_new, new_elems, 3);
    fill_random_bf16<<<1024, 256>>>(v_new, new_elems, 4);
  }
  int* d_cu = dev_copy(cu);
  int* d_seq = dev_copy(s.seq_lens);
  int* d_table = dev_copy(table);

  kernels::PagedAttentionParams p;
  p.q = q;
  p.q_token_stride = s.hq * s.d;
  p.q_head_stride = s.d;
  p.k_cache = cache;
  p.v_cache = cache + static_cast<int64_t>(s.block) * s.hkv * s.d;
  p.cache_block_stride = 2LL * s.block * s.hkv * s.d;
  p.cache_token_stride = s.hnd ? s.d : s.hkv * s.d;
  p.cache_head_stride = s.hnd ? static_cast<int64_t>(s.block) * s.d : s.d;
  p.cu_seqlens_q = d_cu;
  p.seqused_k = d_seq;
  p.block_table = d_table;
  p.block_table_stride = max_blocks;
  p.num_reqs = num_reqs;
  p.num_tokens = tokens;
  p.max_query_len = max_q;
  p.max_seq_len = max_seq;
  p.num_heads = s.hq;
  p.num_kv_heads = s.hkv;
  p.head_size = s.d;
  p.block_size = s.block;
  p.scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  p.causal = s.causal;
  p.window_left = s.window_left;
  p.out = out;
  p.out_token_stride = s.hq * s.d;
  p.out_head_stride = s.d;
  p.lse = lse;
  p.lse_head_stride = tokens;
  p.max_num_splits = s.splits;
  p.split_out = split_out;
  p.split_lse = split_lse;
  p.k_new = k_new;
  p.v_new = v_new;
  p.new_token_stride = s.hkv * s.d;
  p.new_head_stride = s.d;

  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> times;
  for (int i = 0; i < 23; ++i) {
    cudaEventRecord(start);
    const Status st = kernels::launch_paged_attention(p, nullptr);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    check(st.ok(), "launch_paged_attention", st.to_string());
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i >= 3) times.push_back(ms);
  }
  const cudaError_t err = cudaGetLastError();
  check(err == cudaSuccess, "CUDA", cudaGetErrorString(err));
  std::sort(times.begin(), times.end());
  for (void* ptr :
       {static_cast<void*>(q), static_cast<void*>(out), static_cast<void*>(cache),
        static_cast<void*>(lse), static_cast<void*>(split_out), static_cast<void*>(split_lse),
        static_cast<void*>(d_cu), static_cast<void*>(d_seq), static_cast<void*>(d_table),
        static_cast<void*>(k_new), static_cast<void*>(v_new)}) {
    cudaFree(ptr);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return {times[times.size() / 2], kv_bytes, flops};
}

void report(const char* name, const Timing& t) {
  std::printf("BENCH %-40s %9.3f ms %8.1f TFLOP/s %7.3f TB/s(KV)\n", name, t.ms,
              t.flops / t.ms / 1e9, t.kv_bytes / t.ms / 1e9);
}

Shape decode_shape(int splits) {
  Shape s;
  s.q_lens.assign(64, 1);
  s.seq_lens.assign(64, 4096);
  s.splits = splits;
  return s;
}

void run_issue_shapes() {
  Shape prefill;
  prefill.q_lens = {8192};
  prefill.seq_lens = {8192};
  prefill.causal = false;
  report("prefill 8192 noncausal", time_shape(prefill));
  prefill.causal = true;
  report("prefill 8192 causal", time_shape(prefill));
  // First prefills from the paged cache and from the ragged source (the new tokens' K/V).
  for (const bool causal : {false, true}) {
    for (const int reqs : {1, 16}) {
      for (const bool ragged : {false, true}) {
        Shape first;
        first.q_lens.assign(reqs, 8192 / reqs);
        first.seq_lens = first.q_lens;
        first.causal = causal;
        first.ragged = ragged;
        char name[64];
        std::snprintf(name, sizeof name, "prefill %dx%d %s %s", reqs, 8192 / reqs,
                      causal ? "causal" : "noncausal", ragged ? "ragged" : "paged");
        report(name, time_shape(first));
      }
    }
  }
  // A chunk over context (paged) beside first prefills (ragged when the new tokens are given).
  for (const bool ragged : {false, true}) {
    Shape mixed;
    mixed.q_lens = {2048, 512, 512, 512, 512};
    mixed.seq_lens = {4096, 512, 512, 512, 512};
    mixed.ragged = ragged;
    report(ragged ? "prefill 2048-chunk + 4x512 first, ragged"
                  : "prefill 2048-chunk + 4x512 first, paged",
           time_shape(mixed));
  }
  // PAGEDATTN_BENCH_PREFILL_ONLY=1: stop here (for profiling one shape).
  const char* only = std::getenv("PAGEDATTN_BENCH_PREFILL_ONLY");
  if (only != nullptr && only[0] == '1') return;

  for (int splits : {1, 2, 3, 4}) {
    char name[64];
    std::snprintf(name, sizeof name, "decode 64x4096 splits=%d", splits);
    report(name, time_shape(decode_shape(splits)));
  }

  Shape hnd = decode_shape(1);
  hnd.hnd = true;
  report("decode 64x4096 HND splits=1", time_shape(hnd));

  // Spec-verify: 4 queries per request, contexts 8k-16k, against decode over the same KV bytes.
  for (int splits : {1, 2}) {
    Shape verify, dec;
    for (int r = 0; r < 32; ++r) {
      verify.seq_lens.push_back(8192 + r * 8192 / 31);
      verify.q_lens.push_back(4);
    }
    dec = verify;
    dec.q_lens.assign(32, 1);
    verify.splits = dec.splits = splits;
    char name[64];
    std::snprintf(name, sizeof name, "verify 32x4q 8k-16k splits=%d", splits);
    const Timing tv = time_shape(verify);
    report(name, tv);
    std::snprintf(name, sizeof name, "decode 32x1q 8k-16k splits=%d", splits);
    const Timing td = time_shape(dec);
    report(name, td);
    std::printf("BENCH verify/decode ratio (splits=%d): %.3f (target <= 1.3)\n", splits,
                tv.ms / td.ms);
  }

  // A sliding window far shorter than the context: splits share the visible tiles.
  for (int splits : {1, 8}) {
    Shape win;
    win.q_lens.assign(8, 1);
    win.seq_lens.assign(8, 32768);
    win.window_left = 4096;
    win.splits = splits;
    char name[64];
    std::snprintf(name, sizeof name, "decode 8x32k window 4096 splits=%d", splits);
    report(name, time_shape(win));
  }

  // Mixed: the 64 decodes plus one 2048-token chunk over 2048 tokens of context.
  for (int splits : {1, 2}) {
    Shape dec = decode_shape(splits), chunk, mixed = decode_shape(splits);
    chunk.q_lens = {2048};
    chunk.seq_lens = {4096};
    chunk.splits = splits;
    mixed.q_lens.push_back(2048);
    mixed.seq_lens.push_back(4096);
    const Timing td = time_shape(dec), tc = time_shape(chunk), tm = time_shape(mixed);
    char name[64];
    std::snprintf(name, sizeof name, "mixed 64 decode + 2048 chunk splits=%d", splits);
    report(name, tm);
    report("  chunk alone", tc);
    std::printf("BENCH mixed/(decode+chunk) ratio (splits=%d): %.3f (target <= 1.15)\n", splits,
                tm.ms / (td.ms + tc.ms));
  }
}

}  // namespace
}  // namespace pagedattn::bench

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device\n");
    return 0;
  }
  pagedattn::bench::run_issue_shapes();
  return pagedattn::bench::g_failed ? 1 : 0;
}
