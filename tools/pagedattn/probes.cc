// Host ceilings: stream-read bandwidth and bf16 dot-product rate, using every hardware thread.
#include "probes.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_simd.h"
#include "backends/cpu/onednn_tiles.h"
#include "backends/cpu/simd_target.h"
#include "runtime/host_memory.h"

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
  // Allocated as the KV caches are (huge pages where the kernel gives them): the machine's rate.
  const std::unique_ptr<U64x2[], decltype(&std::free)> buffer(
      static_cast<U64x2*>(runtime::host_malloc_paged(bytes)), &std::free);
  if (buffer == nullptr)
    return {0.0, "not measured: no " + std::to_string(bytes >> 20) + " MiB buffer"};
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
                    std::to_string(threads) +
                    " threads, allocated as KV caches are, best of passes"};
}

Ceiling measure_host_paged_read_bandwidth(int block_bytes) {
  const size_t bytes = size_t{512} << 20;
  const size_t blocks = bytes / static_cast<size_t>(block_bytes);
  const std::unique_ptr<char[], decltype(&std::free)> buffer(
      static_cast<char*>(runtime::host_malloc_paged(bytes)), &std::free);
  if (buffer == nullptr) return {0.0, "not measured: no 512 MiB buffer"};
  const int threads = num_threads();
  // Each thread's blocks in a shuffled order, as a block table scatters a request's pages.
  std::vector<std::vector<size_t>> order(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    for (size_t b = blocks * t / threads; b < blocks * (t + 1) / threads; ++b)
      order[t].push_back(b);
    std::shuffle(order[t].begin(), order[t].end(), std::mt19937_64(static_cast<uint64_t>(t) + 1));
  }
  run_on_all_threads([&](int t) {
    for (size_t b : order[t]) std::memset(buffer.get() + b * block_bytes, 1, block_bytes);
  });
  const size_t lines = static_cast<size_t>(block_bytes) / 64;
  const size_t vectors_per_line = 64 / sizeof(U64x2);
  std::vector<uint64_t> sink(static_cast<size_t>(threads));
  double best = 0.0;
  for (int pass = 0; pass < 4; ++pass) {
    const double seconds = run_on_all_threads([&](int t) {
      const std::vector<size_t>& mine = order[t];
      uint64_t sum = 0;
      for (size_t i = 0; i < mine.size(); ++i) {
        const char* block = buffer.get() + mine[i] * block_bytes;
        const char* next = buffer.get() + mine[i + 1 < mine.size() ? i + 1 : i] * block_bytes;
        for (size_t l = 0; l < lines; ++l) {
          __builtin_prefetch(next + 64 * l, 0, 2);  // as the decode kernel's prefetcher: into L2
          sum += sum_range(reinterpret_cast<const U64x2*>(block + 64 * l), vectors_per_line);
        }
      }
      sink[t] += sum;
    });
    best = std::max(best, static_cast<double>(blocks * block_bytes) / seconds / 1e9);
  }
  volatile uint64_t keep = 0;
  for (uint64_t s : sink) keep = keep + s;
  return {best, "read of " + std::to_string(block_bytes >> 10) + " KiB blocks in random order, " +
                    "the next block prefetched, by " + std::to_string(threads) +
                    " threads, best of passes"};
}

Ceiling measure_host_dot_rate(bool quick) {
  // Panels of 4 x 128 and 128 x 64 bf16 values: widened to float 18 KiB, resident in L1.
  const int k = 128;
  const int repeats = quick ? 800 : 4000;
  std::vector<uint16_t> a(4 * k), b(64 * k);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint16_t>(0x3A80 + i % 7);  // ~1e-3
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint16_t>(0x3A80 + i % 5);
  using Kernel = float (*)(const uint16_t*, const uint16_t*, int, int, int64_t*);
  struct Method {
    Kernel kernel;
    const char* name;
  };
  const Method methods[] = {
      {&cpu::bf16_dot_kernel, "Highway ReorderWidenMulAccumulate on bf16"},
      {&cpu::widened_dot_kernel, "bf16 widened to f32 once, then f32 FMA, as CPU_ATTN does"}};
  std::vector<float> sink(static_cast<size_t>(num_threads()));
  std::vector<int64_t> flops(static_cast<size_t>(num_threads()));
  double best = 0.0;
  const char* best_name = methods[0].name;
  for (const Method& m : methods) {
    for (int pass = 0; pass < 3; ++pass) {
      const double seconds = run_on_all_threads(
          [&](int t) { sink[t] += m.kernel(a.data(), b.data(), k, repeats, &flops[t]); });
      double total = 0.0;
      for (int64_t f : flops) total += static_cast<double>(f);
      if (total / seconds / 1e9 > best) best = total / seconds / 1e9, best_name = m.name;
    }
  }
  std::string best_method = std::string(best_name) + ", " + cpu::simd_target() +
                            ", register-blocked on cache-resident panels";
  // oneDNN's bf16 matmul, which runs the prefill products where present: 256 x 256 x 256 panels
  // per thread, cache-resident, as the kernel calls it.
  if (cpu::onednn_tiles_available()) {
    const int n = 256;
    const int calls = quick ? 20 : 100;
    const std::vector<uint16_t> x(static_cast<size_t>(n) * n, 0x3A80);
    std::vector<std::vector<float>> c(static_cast<size_t>(num_threads()),
                                      std::vector<float>(static_cast<size_t>(n) * n));
    for (int pass = 0; pass < 3; ++pass) {
      const double seconds = run_on_all_threads([&](int t) {
        for (int i = 0; i < calls; ++i) cpu::matmul_abt(x.data(), x.data(), n, n, n, c[t].data());
      });
      const double rate = 2.0 * n * n * n * calls * num_threads() / seconds / 1e9;
      if (rate > best)
        best = rate, best_method = "oneDNN matmul, " + cpu::onednn_tiles_description();
    }
  }
  volatile float keep = 0.0f;
  for (float s : sink) keep = keep + s;
  return {best, std::string("best bf16 dot-product rate, f32 accumulation: ") + best_method + ", " +
                    std::to_string(num_threads()) + " threads"};
}

}  // namespace pagedattn::cli
