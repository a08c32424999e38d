// The three backend descriptions, the base-class predicates, validate_configuration's order and
// wording, the registry, and the kernel-generation rule (gpu::preferred_generation).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pagedattn/config.h"  // first: flash_attn_backend.h tests PAGEDATTN_WITH_CUDA

#include "backends/factories.h"
#include "backends/flash_attn/flash_attn_backend.h"
#include "backends/gpu/generation.h"
#include "kernels/attention/paged_attention.h"
#include "pagedattn/backend.h"
#include "pagedattn/device_info.h"

namespace pagedattn {
namespace {

AttentionSelectorConfig cuda_config(ComputeCapability cc = {9, 0}) {
  AttentionSelectorConfig c;
  c.device = Device::cuda(0);
  c.compute_capability = cc;
  return c;
}

AttentionSelectorConfig cpu_config() {
  AttentionSelectorConfig c;
  c.device = Device::cpu();
  return c;
}

// validate_configuration without the build-dependent "not built" reason.
std::vector<std::string> reasons_without_build(const AttentionBackend& b,
                                               const AttentionSelectorConfig& c) {
  std::vector<std::string> r = b.validate_configuration(c);
  std::erase_if(r, [](const std::string& s) { return s.starts_with("not built"); });
  return r;
}

TEST(Registry, OrderNamesAliases) {
  auto all = registered_backends();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]->name(), "FLASH_ATTN");
  EXPECT_EQ(all[1]->name(), "FLASHINFER");
  EXPECT_EQ(all[2]->name(), "CPU_ATTN");
  EXPECT_EQ(find_backend("FLASH_ATTN"), &flash_attn_backend());
  EXPECT_EQ(find_backend("flash_attn"), &flash_attn_backend());
  EXPECT_EQ(find_backend("flashinfer"), &flashinfer_backend());
  EXPECT_EQ(find_backend("cpu"), &cpu_attn_backend());
  EXPECT_EQ(find_backend("CPU_ATTN"), &cpu_attn_backend());
  EXPECT_EQ(find_backend("triton_attn"), nullptr);
  EXPECT_EQ(find_backend(""), nullptr);
}

TEST(Backend, CgSupportNamesAndScale) {
  EXPECT_EQ(cg_support_name(AttentionCGSupport::kAlways), "ALWAYS");
  EXPECT_EQ(cg_support_name(AttentionCGSupport::kUniformBatch), "UNIFORM_BATCH");
  EXPECT_EQ(cg_support_name(AttentionCGSupport::kUniformSingleTokenDecode),
            "UNIFORM_SINGLE_TOKEN_DECODE");
  EXPECT_EQ(cg_support_name(AttentionCGSupport::kNever), "NEVER");
  AttentionImplParams p;
  p.head_size = 64;
  EXPECT_FLOAT_EQ(p.resolved_scale(), 0.125f);
  p.scale = 0.3f;
  EXPECT_FLOAT_EQ(p.resolved_scale(), 0.3f);
}

TEST(CpuAttn, Capabilities) {
  const AttentionBackend& b = cpu_attn_backend();
  EXPECT_TRUE(b.supports_dtype(DType::kF32));
  EXPECT_TRUE(b.supports_dtype(DType::kBF16));
  EXPECT_FALSE(b.supports_dtype(DType::kFP8E4M3));
  for (int h : {32, 40, 72, 128, 200, 512}) EXPECT_TRUE(b.supports_head_size(h)) << h;
  for (int h : {24, 33, 516, 520}) EXPECT_FALSE(b.supports_head_size(h)) << h;
  for (int bs : {1, 7, 16, 24, 1024}) EXPECT_TRUE(b.supports_block_size(bs)) << bs;
  EXPECT_FALSE(b.supports_block_size(0));
  EXPECT_TRUE(b.supports_block_size(std::nullopt));
  EXPECT_EQ(b.preferred_block_size(16), 16);
  EXPECT_TRUE(b.supports_attn_type(AttentionType::kEncoderOnly));
  EXPECT_FALSE(b.supports_attn_type(AttentionType::kEncoderDecoder));
  EXPECT_TRUE(b.supports_device(DeviceKind::kCPU));
  EXPECT_FALSE(b.supports_device(DeviceKind::kCUDA));
  EXPECT_FALSE(b.unavailable_reason().has_value());
  AttentionSelectorConfig all = cpu_config();
  all.dtype = DType::kF32;
  all.kv_cache_dtype = KVCacheDType::kFP8E5M2;
  all.block_size = 7;
  all.head_size = 72;
  all.has_sinks = all.use_alibi = all.use_sliding_window = all.use_soft_cap = true;
  all.use_per_head_quant_scales = true;
  all.causal = false;
  all.attn_type = AttentionType::kEncoder;
  EXPECT_TRUE(b.validate_configuration(all).empty());
}

TEST(CpuAttn, RejectsCudaAndCrossAttention) {
  AttentionSelectorConfig c = cuda_config();
  c.attn_type = AttentionType::kEncoderDecoder;
  EXPECT_EQ(cpu_attn_backend().validate_configuration(c),
            (std::vector<std::string>{"device cuda not supported",
                                      "attention type encoder_decoder not supported"}));
}

TEST(FlashAttn, Capabilities) {
  const AttentionBackend& b = flash_attn_backend();
  EXPECT_TRUE(b.supports_dtype(DType::kF16));
  EXPECT_FALSE(b.supports_dtype(DType::kF32));
  for (KVCacheDType kv : {KVCacheDType::kAuto, KVCacheDType::kFloat16, KVCacheDType::kBFloat16,
                          KVCacheDType::kFP8E4M3, KVCacheDType::kFP8E5M2}) {
    EXPECT_TRUE(b.supports_kv_cache_dtype(kv, cuda_config()));
  }
  EXPECT_FALSE(b.supports_block_size(24));
  EXPECT_TRUE(b.supports_block_size(16));
  EXPECT_TRUE(b.supports_block_size(256));
  EXPECT_EQ(b.preferred_block_size(16), 16);
  EXPECT_EQ(b.preferred_block_size(8), 16);
  for (int h : {40, 264, 500, 520, 16, 36}) {
    if (h == 40 && built_with_cuda()) continue;  // depends on the kernels built
    EXPECT_EQ(b.supports_head_size(h), h == 40) << h;
  }
  EXPECT_TRUE(b.supports_compute_capability({8, 0}));
  EXPECT_TRUE(b.supports_compute_capability({12, 0}));
  EXPECT_FALSE(b.supports_compute_capability({7, 5}));
  EXPECT_TRUE(b.supports_attn_type(AttentionType::kEncoder));
  EXPECT_FALSE(b.supports_attn_type(AttentionType::kEncoderDecoder));
  EXPECT_FALSE(b.forward_includes_kv_cache_update());
  EXPECT_FALSE(b.required_kv_cache_layout().has_value());
  EXPECT_EQ(b.get_kv_cache_stride_order(KVCacheLayout::kHND), (KVCacheStrideOrder{0, 1, 3, 2, 4}));
  if (built_with_cuda()) {
    EXPECT_FALSE(b.unavailable_reason().has_value());
  } else {
    EXPECT_EQ(b.unavailable_reason(), "not built in this version (built without CUDA)");
    auto builder = b.make_builder(BuilderParams{});
    EXPECT_EQ(builder.status().code(), StatusCode::kUnimplemented);
    auto impl = b.make_impl(AttentionImplParams{});
    EXPECT_EQ(impl.status().code(), StatusCode::kUnimplemented);
  }
}

TEST(FlashAttn, KVCacheShapeNeedsMultipleOf16) {
  const AttentionBackend& b = flash_attn_backend();
  EXPECT_EQ(*b.get_kv_cache_shape(10, 32, 8, 128, KVCacheDType::kAuto),
            (KVCacheShape{10, 2, 32, 8, 128}));
  auto bad = b.get_kv_cache_shape(10, 24, 8, 128, KVCacheDType::kAuto);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().message().starts_with("Block size must be a multiple of 16."));
  EXPECT_EQ(cpu_attn_backend().get_kv_cache_shape(10, 24, 8, 128, KVCacheDType::kAuto)->at(2), 24);
}

TEST(FlashAttn, EveryReasonInVllmOrder) {
  AttentionSelectorConfig c = cuda_config({7, 5});
  c.head_size = 72 + 4;  // not a multiple of 8
  c.dtype = DType::kF32;
  c.block_size = 24;
  c.attn_type = AttentionType::kEncoderDecoder;
  const std::vector<std::string> expected = {
      "head_size not supported (76; allowed: " + flash_attn_backend().supported_head_sizes_text() +
          ")",
      "dtype not supported (f32; allowed: f16, bf16)",
      "block_size not supported (24; allowed: multiples of 16)",
      "compute capability not supported (7.5)",
      "attention type encoder_decoder not supported",
  };
  EXPECT_EQ(reasons_without_build(flash_attn_backend(), c), expected);
  c.device = Device::cpu();
  c.compute_capability.reset();
  std::vector<std::string> on_cpu = reasons_without_build(flash_attn_backend(), c);
  ASSERT_FALSE(on_cpu.empty());
  EXPECT_EQ(on_cpu[0], "device cpu not supported");
  EXPECT_EQ(std::count(on_cpu.begin(), on_cpu.end(), "compute capability not supported (7.5)"), 0);
}

TEST(FlashAttn, UnavailableReasonComesFirst) {
  const std::vector<std::string> r = flash_attn_backend().validate_configuration(cuda_config());
  if (built_with_cuda()) {
    EXPECT_TRUE(r.empty());
  } else {
    EXPECT_EQ(r, (std::vector<std::string>{"not built in this version (built without CUDA)"}));
  }
}

TEST(FlashAttn, UnknownCapabilityWithoutDevice) {
  if (!cuda_devices().empty()) GTEST_SKIP() << "a CUDA device is present";
  AttentionSelectorConfig c = cuda_config();
  c.compute_capability.reset();
  std::vector<std::string> r = reasons_without_build(flash_attn_backend(), c);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].starts_with("compute capability unknown (no CUDA device cuda:0 found"));
}

TEST(FlashInfer, DescribesWhatItsKernelsServe) {
  const AttentionBackend& b = flashinfer_backend();
  if (built_with_cuda()) {
    EXPECT_EQ(b.unavailable_reason(), std::nullopt);
  } else {
    EXPECT_EQ(b.unavailable_reason(), "not built in this version (built without CUDA)");
    EXPECT_EQ(b.make_builder(BuilderParams{}).status().code(), StatusCode::kUnimplemented);
    EXPECT_EQ(b.make_impl(AttentionImplParams{}).status().code(), StatusCode::kUnimplemented);
  }
  EXPECT_TRUE(b.supports_head_size(128));
  EXPECT_FALSE(b.supports_head_size(100));
  EXPECT_FALSE(b.supports_head_size(520));
  EXPECT_TRUE(b.supports_block_size(1024));
  EXPECT_TRUE(b.supports_block_size(48));  // a multiple of 16
  EXPECT_FALSE(b.supports_block_size(8));
  EXPECT_TRUE(b.supports_compute_capability({8, 0}));
  EXPECT_TRUE(b.supports_compute_capability({12, 1}));
  EXPECT_FALSE(b.supports_compute_capability({12, 2}));
  EXPECT_FALSE(b.supports_compute_capability({7, 5}));
  EXPECT_TRUE(b.supports_non_causal());
  EXPECT_TRUE(b.supports_per_head_quant_scales());
  EXPECT_TRUE(b.supports_sink());
  EXPECT_TRUE(b.supports_alibi());

  AttentionSelectorConfig c = cuda_config();
  c.block_size = 8;
  c.attn_type = AttentionType::kEncoderDecoder;
  std::vector<std::string> expected;
  if (!built_with_cuda()) expected.push_back("not built in this version (built without CUDA)");
  expected.push_back("block_size not supported (8; allowed: multiples of 16)");
  expected.push_back("attention type encoder_decoder not supported");
  EXPECT_EQ(b.validate_configuration(c), expected);
}

// A backend with the base-class defaults, to pin down the predicates vLLM defines on the base.
class MinimalBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return "MINIMAL"; }
  std::vector<DType> supported_dtypes() const override { return {DType::kBF16}; }
  std::vector<KVCacheDType> supported_kv_cache_dtypes() const override {
    return {KVCacheDType::kAuto};
  }
  std::vector<MultipleOf> supported_kernel_block_sizes() const override {
    return {MultipleOf{32}, MultipleOf{48}};
  }
  bool supports_head_size(int h) const override { return h == 128; }
  std::string supported_head_sizes_text() const override { return "128"; }
  bool supports_device(DeviceKind) const override { return true; }
  std::optional<std::string> supports_combination(const AttentionSelectorConfig& c) const override {
    if (c.num_heads % c.num_kv_heads != 0) return "num_heads must be a multiple of num_kv_heads";
    return std::nullopt;
  }
  StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(
      const BuilderParams&) const override {
    return unimplemented("minimal");
  }
  StatusOr<std::unique_ptr<AttentionImpl>> make_impl(const AttentionImplParams&) const override {
    return unimplemented("minimal");
  }
};

TEST(BaseBackend, DefaultsAndEveryReason) {
  MinimalBackend b;
  EXPECT_EQ(b.preferred_block_size(16), 32);  // the smallest base when the default is refused
  EXPECT_EQ(b.preferred_block_size(96), 96);
  EXPECT_TRUE(b.supports_block_size(144));
  EXPECT_FALSE(b.supports_block_size(40));
  EXPECT_TRUE(b.forward_includes_kv_cache_update() == false);
  AttentionSelectorConfig c = cpu_config();
  c.head_size = 64;
  c.dtype = DType::kF16;
  c.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  c.block_size = 40;
  c.has_sinks = true;
  c.use_per_head_quant_scales = true;
  c.attn_type = AttentionType::kEncoder;
  c.causal = false;
  c.use_alibi = true;
  c.use_sliding_window = true;
  c.use_soft_cap = true;
  c.num_heads = 12;
  c.num_kv_heads = 5;
  EXPECT_EQ(b.validate_configuration(c),
            (std::vector<std::string>{
                "head_size not supported (64; allowed: 128)",
                "dtype not supported (f16; allowed: bf16)",
                "kv_cache_dtype not supported (fp8_e4m3; allowed: auto)",
                "block_size not supported (40; allowed: multiples of 32 or 48)",
                "attention sinks not supported",
                "per-head quant scales not supported",
                "attention type encoder not supported",
                "non-causal attention not supported",
                "ALiBi not supported",
                "sliding window not supported",
                "logits soft cap not supported",
                "num_heads must be a multiple of num_kv_heads",
            }));
}

TEST(PreferredGeneration, V2OnAmpereV3OnHopper) {
  const auto flash_attn_version = gpu::preferred_generation;  // vLLM's get_flash_attn_version
  EXPECT_EQ(flash_attn_version({8, 0}, 128), 2);
  EXPECT_EQ(flash_attn_version({8, 6}, 64), 2);
  // Hopper prefers v3 where this build has it (launches v3 does not serve run v2), ALiBi included
  // (vLLM chooses FA2 then; our v3 serves it).
  const int hopper =
      kernels::paged_attention_generation_built(kernels::KernelGeneration::kV3) ? 3 : 2;
  EXPECT_EQ(flash_attn_version({9, 0}, 128), hopper);
  // 512 has its own kernel, which a narrowed CUDA build (PAGEDATTN_HEAD_SIZES) may leave out.
  const bool has_512 = !built_with_cuda() || kernels::paged_attention_kernel_head_size(512) == 512;
  EXPECT_EQ(flash_attn_version({9, 0}, 512), has_512 ? hopper : 0);
  EXPECT_EQ(flash_attn_version({7, 5}, 128), 0);
  EXPECT_EQ(flash_attn_version({9, 0}, 100), 0);
  EXPECT_EQ(flash_attn_version({9, 0}, 384), 0);
}

// Per launch: the preferred generation where it serves, v2 elsewhere unless forced; the report
// says what ran. Head size 80 has no v3 kernel, so v3 never serves these launches.
TEST(LaunchGenerations, FallBackUnlessForcedAndReportWhatRan) {
  kernels::PagedAttentionParams p;
  p.head_size = 80;
  gpu::LaunchGenerations v2(kernels::KernelGeneration::kV2, /*forced=*/false);
  EXPECT_EQ(v2.used(), "v2");
  v2.choose(p, gpu::PassKernel::kV3);
  EXPECT_EQ(p.generation, kernels::KernelGeneration::kV2);
  EXPECT_EQ(v2.used(), "v2");

  gpu::LaunchGenerations prefers_v3(kernels::KernelGeneration::kV3, /*forced=*/false);
  EXPECT_EQ(prefers_v3.used(), "v3/v2");  // before any launch: v3 where it serves
  prefers_v3.choose(p, gpu::PassKernel::kV3);
  EXPECT_EQ(p.generation, kernels::KernelGeneration::kV2);
  EXPECT_EQ(prefers_v3.used(), "v2");

  gpu::LaunchGenerations forced_v3(kernels::KernelGeneration::kV3, /*forced=*/true);
  forced_v3.choose(p, gpu::PassKernel::kV2);                // forced beats the pass's kernel
  EXPECT_EQ(p.generation, kernels::KernelGeneration::kV3);  // the launch itself will refuse it
  EXPECT_EQ(forced_v3.used(), "v3");
}

// Unpacked v3 reads a decode's K/V once per query head: passes with decodes and prefills run packed
// v3, decode-only passes v2, prefill-only passes (or no GQA) unpacked v3.
TEST(LaunchGenerations, PassKernelByCost) {
  // 64 decodes of 4096 keys beside one 2048-token chunk over 2048 keys of context (32/8 heads):
  // measured 1.23 ms on v3, 0.68 ms on v2, 0.55 ms on packed v3.
  std::vector<int32_t> qsl{0}, seqs;
  for (int r = 0; r < 64; ++r) {
    qsl.push_back(qsl.back() + 1);
    seqs.push_back(4096);
  }
  qsl.push_back(qsl.back() + 2048);
  seqs.push_back(4096);
  EXPECT_EQ(gpu::pass_kernel(qsl, seqs, 32, 8, true), gpu::PassKernel::kV3Packed);
  // The chunk with 4 decodes: their per-head reads still cost more than packing's 3 %.
  const std::vector<int32_t> few_qsl{0, 1, 2, 3, 4, 2052}, few_seqs{4096, 4096, 4096, 4096, 4096};
  EXPECT_EQ(gpu::pass_kernel(few_qsl, few_seqs, 32, 8, true), gpu::PassKernel::kV3Packed);
  // One short decode beside the chunk: unpacked.
  const std::vector<int32_t> one_qsl{0, 1, 2049}, one_seqs{64, 4096};
  EXPECT_EQ(gpu::pass_kernel(one_qsl, one_seqs, 32, 8, true), gpu::PassKernel::kV3);
  // No GQA (the decodes' reads are the same either way), or no decodes: unpacked v3.
  EXPECT_EQ(gpu::pass_kernel(qsl, seqs, 8, 8, true), gpu::PassKernel::kV3);
  const std::vector<int32_t> chunk_qsl{0, 2048}, chunk_seqs{4096};
  EXPECT_EQ(gpu::pass_kernel(chunk_qsl, chunk_seqs, 32, 8, true), gpu::PassKernel::kV3);
  // Decodes only: v2.
  const std::vector<int32_t> dec_qsl(qsl.begin(), qsl.end() - 1);
  const std::vector<int32_t> dec_seqs(seqs.begin(), seqs.end() - 1);
  EXPECT_EQ(gpu::pass_kernel(dec_qsl, dec_seqs, 32, 8, true), gpu::PassKernel::kV2);

  kernels::PagedAttentionParams p;
  p.head_size = 80;
  gpu::LaunchGenerations prefers_v3(kernels::KernelGeneration::kV3, /*forced=*/false);
  prefers_v3.choose(p, gpu::PassKernel::kV2);
  EXPECT_EQ(p.generation, kernels::KernelGeneration::kV2);
  EXPECT_FALSE(p.pack_gqa);
}

// BuilderParams::deterministic: a pass's kernel never follows the batch's mix (each request's v2
// tile comes from its own rows); otherwise the cost rule above chooses.
TEST(LaunchGenerations, DeterministicBuildersFixThePassKernel) {
  const std::vector<int32_t> one_qsl{0, 1, 2049}, one_seqs{64, 4096};
  const std::vector<int32_t> chunk_qsl{0, 2048}, chunk_seqs{4096};
  BuilderParams bp;
  bp.num_heads = 32;
  bp.num_kv_heads = 8;
  EXPECT_EQ(gpu::builder_pass_kernel(bp, one_qsl, one_seqs, true), gpu::PassKernel::kV3);
  EXPECT_EQ(gpu::builder_pass_kernel(bp, chunk_qsl, chunk_seqs, true), gpu::PassKernel::kV3);
  bp.deterministic = true;
  EXPECT_EQ(gpu::builder_pass_kernel(bp, one_qsl, one_seqs, true), gpu::PassKernel::kV2);
  EXPECT_EQ(gpu::builder_pass_kernel(bp, chunk_qsl, chunk_seqs, true), gpu::PassKernel::kV2);
}

}  // namespace
}  // namespace pagedattn
