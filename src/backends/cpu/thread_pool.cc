// The persistent pool behind parallel_for.
#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace pagedattn::cpu {
namespace {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads) {
    for (int i = 1; i < num_threads; ++i) {
      std::thread([this] { worker_loop(); }).detach();
    }
    num_workers_ = num_threads - 1;
  }

  void run(int64_t n, const std::function<void(int64_t)>& fn) {
    if (n <= 0) return;
    std::lock_guard<std::mutex> caller_lock(caller_mutex_);
    if (num_workers_ == 0 || n == 1) {
      for (int64_t i = 0; i < n; ++i) fn(i);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fn_ = &fn;
      n_ = n;
      next_.store(0);
      busy_ = num_workers_;
      ++generation_;
    }
    wake_.notify_all();
    drain();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return busy_ == 0; });
    fn_ = nullptr;
  }

 private:
  void drain() {
    for (int64_t i = next_.fetch_add(1); i < n_; i = next_.fetch_add(1)) (*fn_)(i);
  }

  void worker_loop() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
      }
      drain();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) done_.notify_one();
    }
  }

  std::mutex caller_mutex_;  // one parallel_for at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
  int busy_ = 0;
  uint64_t generation_ = 0;
  int num_workers_ = 0;
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

void parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  // Never destroyed: the detached workers may outlive static destruction at exit.
  static ThreadPool* pool = new ThreadPool(cpu_thread_count());
  pool->run(n, fn);
}

}  // namespace pagedattn::cpu
