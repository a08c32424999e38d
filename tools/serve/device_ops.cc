// Host DeviceOps; in a build without CUDA, make_cuda_ops says so.
#include "serve/device_ops.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "pagedattn/config.h"

namespace pagedattn::serve {
namespace {

class HostOps final : public DeviceOps {
 public:
  ~HostOps() override {
    for (void* p : owned_) std::free(p);
  }
  Device device() const override { return Device::cpu(); }
  StreamHandle stream() const override { return nullptr; }
  StatusOr<uint64_t> available_bytes() const override {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    uint64_t kib = 0;
    while (meminfo >> key >> kib) {
      if (key == "MemAvailable:") return kib * 1024;
      meminfo.ignore(64, '\n');
    }
    return uint64_t{static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES))} *
           static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  }
  StatusOr<void*> allocate(size_t bytes) override {
    const size_t rounded = (bytes + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
    if (p == nullptr)
      return internal_error("out of host memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, rounded == 0 ? 256 : rounded);
    owned_.push_back(p);
    return p;
  }
  Status upload(void* dst, const void* src, size_t bytes) override { return copy(dst, src, bytes); }
  Status copy(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return ok_status();
  }
  Status download(void* dst, const void* src, size_t bytes) override {
    return copy(dst, src, bytes);
  }
  Status fill(void* dst, uint8_t byte, size_t bytes) override {
    std::memset(dst, byte, bytes);
    return ok_status();
  }
  Status synchronize() override { return ok_status(); }
  StatusOr<double> time(const std::function<Status()>& work) override {
    const auto start = std::chrono::steady_clock::now();
    PAGEDATTN_RETURN_IF_ERROR(work());
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  }

 private:
  std::vector<void*> owned_;
};

}  // namespace

std::unique_ptr<DeviceOps> make_host_ops() {
  return std::make_unique<HostOps>();
}

#if !PAGEDATTN_WITH_CUDA
StatusOr<std::unique_ptr<DeviceOps>> make_cuda_ops(int) {
  return unimplemented("this build has no CUDA: only the CPU backend can serve");
}
#endif

}  // namespace pagedattn::serve
