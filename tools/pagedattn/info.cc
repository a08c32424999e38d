// `pagedattn info`: version, build options, backends and whether each can run, devices found.
#include <iostream>
#include <thread>

#include "backends/cpu/onednn_tiles.h"
#include "backends/cpu/simd_target.h"
#include "commands.h"
#include "common.h"
#include "pagedattn/backend.h"
#include "pagedattn/config.h"
#include "pagedattn/device_info.h"

namespace pagedattn::cli {

void add_info_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("info", "Version, build options, backends and devices");
  cmd->callback([&exit_code] {
    std::cout << "pagedattn " << PAGEDATTN_VERSION << "\n"
              << "build:\n"
              << "  CUDA:        " << (PAGEDATTN_WITH_CUDA ? "on" : "off") << "\n";
    if (PAGEDATTN_WITH_CUDA) {
      std::cout << "  CUDA archs:  " << PAGEDATTN_CUDA_ARCHS << "\n"
                << "  head sizes:  " << PAGEDATTN_HEAD_SIZES << " (CUDA kernels built)\n";
    }
    std::cout << "backends (priority on CUDA: FLASH_ATTN, FLASHINFER; on CPU: CPU_ATTN):\n";
    for (const AttentionBackend* backend : registered_backends()) {
      std::optional<std::string> why = backend->unavailable_reason();
      std::cout << "  " << backend->name() << std::string(12 - backend->name().size(), ' ')
                << (why ? "unavailable: " + *why : std::string("available")) << "\n"
                << "              head sizes: " << backend->supported_head_sizes_text() << "\n";
      std::string generations;
      for (const std::string& g : backend->kernel_generations()) {
        generations += (generations.empty() ? "" : ", ") + g;
      }
      if (!generations.empty()) {
        std::cout << "              kernel generations: " << generations << "\n";
      }
    }
    std::cout << "devices:\n"
              << "  cpu: " << std::thread::hardware_concurrency() << " hardware threads\n";
    std::string targets;
    for (const std::string& t : cpu::simd_targets_available()) {
      targets += (targets.empty() ? "" : ", ") + t;
    }
    std::cout << "  cpu simd: " << cpu::simd_target() << " (of " << targets
              << "; PAGEDATTN_CPU_SIMD chooses another)\n"
              << "  cpu prefill products: " << cpu::onednn_tiles_description() << "\n";
    const std::vector<CudaDeviceInfo> devices = cuda_devices();
    if (devices.empty()) {
      std::cout << "  cuda: none" << (PAGEDATTN_WITH_CUDA ? " found" : " (built without CUDA)")
                << "\n";
    }
    for (const CudaDeviceInfo& d : devices) {
      std::cout << "  cuda:" << d.index << ": " << d.name << ", compute capability "
                << compute_capability_name(d.capability) << ", "
                << format_bytes(static_cast<double>(d.total_memory_bytes)) << ", " << d.num_sms
                << " SMs\n";
    }
    std::cout << "default device: " << device_name(default_device()) << "\n";
    exit_code = kExitOk;
  });
}

}  // namespace pagedattn::cli
