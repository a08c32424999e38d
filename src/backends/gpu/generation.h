// The kernel generation of a GPU impl's paged attention launches, one rule for every GPU backend:
// preferred_generation is vLLM's get_flash_attn_version (v3, Hopper wgmma + TMA, on compute
// capability 9.x in builds with sm_90a; else v2, mma.sync, sm_80+) except that ALiBi keeps v3 (vLLM
// chooses FA2 then; our v3 serves ALiBi), chosen once per layer; each launch runs it where it
// serves (kernels::paged_attention_serves) and v2 elsewhere, unless the layer forced a generation
// (AttentionImplParams::kernel_generation); and what the launches used is reported.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>

#include "kernels/attention/paged_attention.h"
#include "pagedattn/backend.h"

namespace pagedattn::gpu {

// 2 or 3; 0 when no generation of this build serves the head size on that device.
int preferred_generation(ComputeCapability cc, int head_size);

// How a pass runs where v3 serves it. Unpacked v3 reads a decode-shaped request's K/V (query_len x
// group <= 16) once per query head; packed v3 (PagedAttentionParams::pack_gqa) and v2 once per KV
// head, packed v3 a little slower than unpacked on prefills and than v2 on decodes.
enum class PassKernel { kV3, kV3Packed, kV2 };

// The fastest of the three for a pass, by a cost model of the kernels' rates (generation.cc;
// docs/kernels/v3_prefill.md). Host arrays of the pass's requests: query_start_loc [n + 1],
// seq_lens [n].
PassKernel pass_kernel(std::span<const int32_t> query_start_loc, std::span<const int32_t> seq_lens,
                       int num_heads, int num_kv_heads, bool causal);

// A builder's choice for a pass: pass_kernel, except under BuilderParams::deterministic, where
// every pass runs v2 (each request's tile shape comes from its own rows), so that no request's
// kernel follows the rest of the batch.
PassKernel builder_pass_kernel(const BuilderParams& params,
                               std::span<const int32_t> query_start_loc,
                               std::span<const int32_t> seq_lens, bool causal);

class LaunchGenerations {
 public:
  // The layer's generation on its device (CUDA builds: reads the compute capability), or the
  // Status naming why none can run (`backend` prefixes it).
  static StatusOr<kernels::KernelGeneration> for_layer(std::string_view backend,
                                                       const AttentionImplParams& params);

  LaunchGenerations(kernels::KernelGeneration preferred, bool forced)
      : preferred_(preferred), forced_(forced) {}

  // Sets p.generation (and p.pack_gqa) for this launch and records it; kernel: pass_kernel for its
  // pass. Packed v3 where it does not serve (soft cap, ALiBi, FP8) and v3 where it does not serve
  // run v2; a forced v3 packs where the pass has decodes (unpacked v3 refuses decode-only passes).
  void choose(kernels::PagedAttentionParams& p, PassKernel kernel) {
    p.generation = preferred_;
    p.pack_gqa = preferred_ == kernels::KernelGeneration::kV3 && kernel != PassKernel::kV3;
    if (!forced_ && preferred_ != kernels::KernelGeneration::kV2 &&
        (kernel == PassKernel::kV2 || !kernels::paged_attention_serves(p).ok())) {
      p.generation = kernels::KernelGeneration::kV2;
      p.pack_gqa = false;
      p.fp8_tensor_cores = false;  // v2 converts the cache to 16 bits
    }
    used_.fetch_or(p.generation == kernels::KernelGeneration::kV3 ? kUsedV3 : kUsedV2,
                   std::memory_order_relaxed);
  }

  // Records a launch of the decode kernel beside the paged ones.
  void note_decode() { used_.fetch_or(kUsedDecode, std::memory_order_relaxed); }

  // "v2", "v3", or "v3/v2" when launches used both (or, before any launch, when v3 is preferred:
  // it runs where it serves and v2 elsewhere); prefixed "decode+" once the decode kernel ran.
  std::string_view used() const {
    const int used = used_.load(std::memory_order_relaxed);
    const bool decode = (used & kUsedDecode) != 0;
    const int paged = used & ~kUsedDecode;
    if (paged == kUsedV2 || (paged == 0 && preferred_ == kernels::KernelGeneration::kV2)) {
      return decode ? "decode+v2" : "v2";
    }
    if (paged == kUsedV3) return decode ? "decode+v3" : "v3";
    return decode ? "decode+v3/v2" : "v3/v2";
  }

 private:
  static constexpr int kUsedV2 = 1, kUsedV3 = 2, kUsedDecode = 4;
  kernels::KernelGeneration preferred_;
  bool forced_;
  std::atomic<int> used_{0};
};

}  // namespace pagedattn::gpu
