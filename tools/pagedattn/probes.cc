// Host ceilings: stream-read bandwidth and float32 matmul rate, using every hardware thread.
#include "probes.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pagedattn::cli {
namespace {

using Clock = std::chrono::steady_clock;

int num_threads() {
  return std::max(1u, std::thread::hardware_concurrency());
}

// Runs fn(thread) on every hardware thread at once and returns the wall time in seconds.
template <typename Fn>
double run_on_all_threads(Fn fn) {
  const int n = num_threads();
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  Clock::time_point start;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      fn(t);
    });
  }
  while (ready.load() < n) {
  }
  start = Clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& th : threads) th.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// 16-byte vectors (SSE2 on x86-64, NEON on Arm): four independent sums per 64-byte line.
typedef uint64_t U64x2 __attribute__((vector_size(16)));

uint64_t sum_range(const U64x2* p, size_t n) {
  U64x2 a = {0, 0}, b = a, c = a, d = a;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  const U64x2 s = a + b + c + d;
  return s[0] + s[1];
}

#if defined(__x86_64__)
// C[6 x 16] += A[6 x k] * B[k x 16]: 12 accumulators, the classic AVX2 register block.
__attribute__((target("avx2,fma"))) float fma_kernel_avx2(const float* a, const float* b, int k,
                                                          int repeats) {
  __m256 c[6][2];
  for (auto& row : c) row[0] = row[1] = _mm256_setzero_ps();
  for (int r = 0; r < repeats; ++r) {
    for (int p = 0; p < k; ++p) {
      const __m256 b0 = _mm256_loadu_ps(b + p * 16), b1 = _mm256_loadu_ps(b + p * 16 + 8);
      for (int i = 0; i < 6; ++i) {
        const __m256 ai = _mm256_broadcast_ss(a + p * 6 + i);
        c[i][0] = _mm256_fmadd_ps(ai, b0, c[i][0]);
        c[i][1] = _mm256_fmadd_ps(ai, b1, c[i][1]);
      }
    }
  }
  __m256 s = _mm256_setzero_ps();
  for (auto& row : c) s = _mm256_add_ps(s, _mm256_add_ps(row[0], row[1]));
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}
#endif

float fma_kernel_generic(const float* a, const float* b, int k, int repeats) {
  float c[6][16] = {};
  for (int r = 0; r < repeats; ++r) {
    for (int p = 0; p < k; ++p) {
      for (int i = 0; i < 6; ++i) {
        for (int j = 0; j < 16; ++j) c[i][j] += a[p * 6 + i] * b[p * 16 + j];
      }
    }
  }
  return c[0][0] + c[5][15];
}

}  // namespace

Ceiling measure_read_ceiling(const Device& device) {
#if PAGEDATTN_WITH_CUDA
  if (device.is_cuda()) return measure_cuda_read_bandwidth(device.index);
#endif
  if (device.is_cpu()) return measure_host_read_bandwidth();
  return {0.0, "not measured: " + device_name(device) + " needs a CUDA build"};
}

std::string describe_ceiling(const Ceiling& c, const std::string& unit) {
  if (c.value <= 0.0) return c.method.empty() ? "not measured" : c.method;
  char value[32];
  std::snprintf(value, sizeof(value), "%.1f ", c.value);
  return value + unit + " (" + c.method + ")";
}

Ceiling measure_host_read_bandwidth() {
  // Larger than the last-level cache so that the passes stream from DRAM.
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = 32L << 20;
  const size_t bytes =
      std::clamp<size_t>(static_cast<size_t>(llc) * 2, size_t{512} << 20, size_t{2} << 30);
  const size_t n = bytes / sizeof(U64x2);
  std::unique_ptr<U64x2[]> buffer(new U64x2[n]);
  const int threads = num_threads();
  auto slice = [&](int t) {
    return std::pair<size_t, size_t>{n * t / threads, n * (t + 1) / threads};
  };
  // First touch from the thread that will read each slice (NUMA placement, page faults).
  run_on_all_threads([&](int t) {
    auto [lo, hi] = slice(t);
    for (size_t i = lo; i < hi; ++i) buffer[i] = U64x2{i, i ^ 0x5555};
  });
  std::vector<uint64_t> sink(static_cast<size_t>(threads));
  double best = 0.0;
  for (int pass = 0; pass < 6; ++pass) {
    const double seconds = run_on_all_threads([&](int t) {
      auto [lo, hi] = slice(t);
      sink[t] += sum_range(buffer.get() + lo, hi - lo);
    });
    best = std::max(best, static_cast<double>(bytes) / seconds / 1e9);
  }
  volatile uint64_t keep = 0;
  for (uint64_t s : sink) keep = keep + s;
  return {best, "read of a " + std::to_string(bytes >> 20) + " MiB buffer by " +
                    std::to_string(threads) + " threads, best of passes"};
}

Ceiling measure_host_matmul_rate(bool quick) {
  const int k = 256;  // panels of 6x256 and 256x16 floats: 22 KiB, resident in L1/L2
  const int repeats = quick ? 400 : 2000;
  std::vector<float> a(6 * k), b(16 * k);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 1e-3f * static_cast<float>(i % 7);
  for (size_t i = 0; i < b.size(); ++i) b[i] = 1e-3f * static_cast<float>(i % 5);
  bool avx2 = false;
#if defined(__x86_64__)
  avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  std::vector<float> sink(static_cast<size_t>(num_threads()));
  double best = 0.0;
  for (int pass = 0; pass < 3; ++pass) {
    const double seconds = run_on_all_threads([&](int t) {
#if defined(__x86_64__)
      if (avx2) {
        sink[t] += fma_kernel_avx2(a.data(), b.data(), k, repeats);
        return;
      }
#endif
      sink[t] += fma_kernel_generic(a.data(), b.data(), k, repeats / 8);
    });
    const double flops = 2.0 * 6 * 16 * k * (avx2 ? repeats : repeats / 8) * num_threads();
    best = std::max(best, flops / seconds / 1e9);
  }
  volatile float keep = 0.0f;
  for (float s : sink) keep = keep + s;
  return {best, std::string("f32 6x16 register-blocked matmul on cache-resident panels, ") +
                    (avx2 ? "AVX2+FMA, " : "plain C++, ") + std::to_string(num_threads()) +
                    " threads"};
}

}  // namespace pagedattn::cli
