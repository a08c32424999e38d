// The persistent pool behind parallel_for.
#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace pagedattn::cpu {
namespace {

// How long an idle worker (or the waiting caller) polls before it sleeps: longer than the gap
// between the passes of one forward, far shorter than the gap between steps of a quiet engine.
constexpr auto kSpin = std::chrono::microseconds(300);

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads) : num_workers_(num_threads - 1) {
    for (int i = 0; i < num_workers_; ++i) std::thread([this] { worker_loop(); }).detach();
  }

  void run(int64_t n, void (*fn)(void*, int64_t), void* context) {
    if (n <= 0) return;
    std::lock_guard<std::mutex> caller_lock(caller_mutex_);
    if (num_workers_ == 0 || n == 1) {
      for (int64_t i = 0; i < n; ++i) fn(context, i);
      return;
    }
    fn_ = fn;
    context_ = context;
    n_ = n;
    next_.store(0, std::memory_order_relaxed);
    pending_.store(num_workers_, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      generation_.fetch_add(1, std::memory_order_release);
      if (sleepers_ > 0) wake_.notify_all();
    }
    drain();
    if (!spin_until([this] { return pending_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
    }
  }

 private:
  template <class Pred>
  static bool spin_until(Pred ready) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0;; ++i) {
      if (ready()) return true;
      if ((i & 63) == 63 && std::chrono::steady_clock::now() - start > kSpin) return ready();
      if ((i & 7) == 7) std::this_thread::yield();  // leave the core to other work on a busy host
    }
  }

  void drain() {
    for (int64_t i = next_.fetch_add(1); i < n_; i = next_.fetch_add(1)) fn_(context_, i);
  }

  void worker_loop() {
    uint64_t seen = 0;
    for (;;) {
      auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!spin_until(fresh)) {
        std::unique_lock<std::mutex> lock(mutex_);
        ++sleepers_;
        wake_.wait(lock, fresh);
        --sleepers_;
      }
      seen = generation_.load(std::memory_order_acquire);
      drain();
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);  // pairs with the caller's check under the lock
        done_.notify_one();
      }
    }
  }

  const int num_workers_;
  std::mutex caller_mutex_;  // one parallel_for at a time
  std::mutex mutex_;         // guards sleeping on wake_ and done_
  std::condition_variable wake_;
  std::condition_variable done_;
  int sleepers_ = 0;
  std::atomic<uint64_t> generation_{0};
  void (*fn_)(void*, int64_t) = nullptr;
  void* context_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int> pending_{0};
};

}  // namespace

int cpu_thread_count() {
  static const int count = [] {
    if (const char* env = std::getenv("PAGEDATTN_CPU_THREADS")) {
      const int requested = std::atoi(env);
      if (requested > 0) return std::min(requested, 1024);
    }
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return count;
}

void parallel_for(int64_t n, void (*fn)(void*, int64_t), void* context) {
  // Never destroyed: the detached workers may outlive static destruction at exit.
  static ThreadPool* pool = new ThreadPool(cpu_thread_count());
  pool->run(n, fn, context);
}

}  // namespace pagedattn::cpu
