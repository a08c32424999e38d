// The backend abstraction (vLLM v1's attention layer): a backend describes what it can serve and
// makes a metadata builder (once per KV-cache group) and an impl (once per layer). Per step the
// engine calls builder.build(...) once, then per layer impl.do_kv_cache_update(...) and
// impl.forward(...).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pagedattn/kv_cache.h"
#include "pagedattn/metadata.h"
#include "pagedattn/status.h"
#include "pagedattn/tensor.h"
#include "pagedattn/types.h"

namespace pagedattn {

// Opaque cudaStream_t (nullptr = the default stream); public headers include no CUDA headers.
using StreamHandle = void*;

class Communicator;  // pagedattn/communicator.h

// How DCP ranks combine their partial attention (vLLM's dcp_comm_backend; docs/dcp.md):
// all-gather of LSEs + reduce-scatter of outputs, or all-to-all + a local reduce.
enum class DcpCommBackend { kAgRs, kA2a };

// How much of a step a backend can run under a full CUDA graph (vLLM's AttentionCGSupport).
enum class AttentionCGSupport {
  kNever = 0,
  kUniformSingleTokenDecode = 1,
  kUniformBatch = 2,
  kAlways = 3
};
std::string_view cg_support_name(AttentionCGSupport support);  // "ALWAYS", ...

// What the selector asks of a backend (vLLM's AttentionSelectorConfig plus the device).
struct AttentionSelectorConfig {
  int head_size = 128;
  int num_heads = 32;
  int num_kv_heads = 8;
  DType dtype = DType::kBF16;
  KVCacheDType kv_cache_dtype = KVCacheDType::kAuto;
  std::optional<int> block_size;  // unset = the backend's preferred size
  bool has_sinks = false;
  bool use_alibi = false;
  bool use_sliding_window = false;
  bool use_soft_cap = false;
  bool causal = true;
  AttentionType attn_type = AttentionType::kDecoder;
  bool use_per_head_quant_scales = false;
  Device device = Device::cpu();
  std::optional<ComputeCapability> compute_capability;  // CUDA only; unset = the device's own
  // Decode context parallelism: ranks sharing each sequence's KV tokens (vLLM's
  // decode_context_parallel_size); num_heads is then one rank's share of the query heads.
  int dcp_world_size = 1;
};

// Per-layer constants (vLLM's AttentionImpl.__init__).
struct AttentionImplParams {
  int num_heads = 0;
  int head_size = 0;
  float scale = 0.0f;  // <= 0 means 1/sqrt(head_size)
  int num_kv_heads = 0;
  DType dtype = DType::kBF16;       // query / output dtype
  std::vector<float> alibi_slopes;  // [num_heads] or empty
  SlidingWindow sliding_window;     // (-1, -1) = none
  KVCacheDType kv_cache_dtype = KVCacheDType::kAuto;
  float logits_soft_cap = 0.0f;  // <= 0 = none
  AttentionType attn_type = AttentionType::kDecoder;
  std::vector<float> sinks;                       // [num_heads] logits or empty
  KVCacheLayout kv_layout = KVCacheLayout::kNHD;  // a cache strided otherwise is refused
  Device device = Device::cpu();
  // Decode context parallelism (docs/dcp.md): the group of ranks that shard this layer's KV cache
  // by tokens (vLLM's get_dcp_group(); not owned, must outlive the impl), null = no DCP. Under DCP,
  // num_heads, sinks and forward's query/output are this rank's heads; the group's ranks hold
  // world_size * num_heads query heads over the same num_kv_heads KV heads.
  Communicator* dcp_group = nullptr;
  DcpCommBackend dcp_comm_backend = DcpCommBackend::kAgRs;  // how the ranks combine (vLLM's default)
  // GPU backends: 0 lets the backend choose its kernel generation per launch (vLLM's
  // get_flash_attn_version rule); 2 or 3 forces one for comparisons (an error where it cannot run).
  int kernel_generation = 0;
  // GPU backends: permission to run prefills over an e4m3 cache on the FP8 tensor cores (the v3 FP8
  // kernel, FlashAttention-3's FP8 path: Q and P rounded to e4m3 too, about 3e-2 relative error
  // against 2e-3 where the cache is converted to 16 bits; docs/attention.md states the bound). A
  // launch it cannot serve (head size, page size, split, workspace) converts the cache as without
  // it. Needs kv_cache_dtype fp8 / fp8_e4m3; CPU_ATTN computes as without it.
  bool fp8_tensor_cores = false;

  // The scores scale · q·k are float32 in every backend, so a scale above this would overflow
  // them for ordinary inputs.
  static constexpr float kMaxScale = 1e6f;

  float resolved_scale() const;
  // This layer's mask in a step whose metadata says `step_causal` (vLLM's rule): decoder layers
  // follow the step; encoder, encoder-only and cross-attention layers are bidirectional whatever
  // the step says.
  bool causal_in_step(bool step_causal) const;
  // The checks every backend shares (heads, scale, soft cap, ALiBi, sinks, window, generation);
  // backends add their own (device, head sizes, dtypes) on top.
  Status validate() const;
};

// What a builder needs to know once (the KV-cache spec and the limits its persistent buffers
// cover). The KV-cache spec (heads, head size, dtype, kv_cache_dtype) must be the one of every
// layer run with the builder's metadata: forward refuses a layer that differs, naming the field.
// The cache's layout is the layer's (AttentionImplParams::kv_layout): no plan depends on it.
struct BuilderParams {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_size = 0;
  int block_size = 16;
  DType dtype = DType::kBF16;
  KVCacheDType kv_cache_dtype = KVCacheDType::kAuto;
  Device device = Device::cpu();
  int max_num_reqs = 256;
  int max_num_tokens = 8192;
  int max_model_len = 32768;
  bool use_alibi = false;
  SlidingWindow
      sliding_window;  // the layer's window ((-1, -1) = none); sizes the split-KV schedule
  int num_sms = 0;     // 0 = ask the device
  // Split-KV bound (FlashAttention's num_splits): 0 = the backend decides, 1 = no split, n = at
  // most n splits of a request's keys. FLASHINFER refuses a bound (its decode plan cuts work
  // units).
  int max_num_splits = 0;
  // Batch invariance (vLLM's VLLM_BATCH_INVARIANT): a request's output bits do not depend on the
  // rest of the batch. Every backend then runs no cascade; FLASHINFER splits decode KV only at
  // fixed multiples and never splits prefills; FLASH_ATTN never splits KV; CPU_ATTN's plain
  // attention is batch invariant either way.
  bool deterministic = false;

  bool use_sliding_window() const { return sliding_window.enabled(); }
};

// Backend-specific per-step metadata; each builder returns its own subclass.
struct AttentionMetadata {
  virtual ~AttentionMetadata() = default;
  // Set by build_for_cudagraph_capture (never by build): forward launches shapes that stay valid
  // when a graph captured from it replays after later builds (FLASH_ATTN: the graph-safe split
  // bound instead of this step's own), so forward never asks the stream whether it is capturing.
  // Such metadata also runs eagerly, with the same results.
  bool for_cudagraph_capture = false;
};

class AttentionMetadataBuilder {
 public:
  virtual ~AttentionMetadataBuilder() = default;
  virtual AttentionCGSupport cudagraph_support() const = 0;
  // Requests with query_len <= threshold must come first (the engine reorders); unset = no need.
  virtual std::optional<int> reorder_batch_threshold() const { return std::nullopt; }
  virtual StatusOr<std::unique_ptr<AttentionMetadata>> build(
      int common_prefix_len, const CommonAttentionMetadata& meta) = 0;
  // build(0, meta) marked for_cudagraph_capture: the metadata a captured forward is given.
  StatusOr<std::unique_ptr<AttentionMetadata>> build_for_cudagraph_capture(
      const CommonAttentionMetadata& meta);
  // Whether the engine passes a shared prefix to build() as common_prefix_len: vLLM's rule
  // (cascade_attention_pays_off), the same for every backend, and never for a builder made
  // deterministic. build() never decides again: it runs the prefix it is given as cascade, or
  // returns an InvalidArgument naming what it cannot serve.
  virtual bool use_cascade_attention(int common_prefix_len, std::span<const int32_t> query_lens,
                                     int num_query_heads, int num_kv_heads, bool use_alibi,
                                     bool use_sliding_window, bool use_local_attention, int num_sms,
                                     int dcp_world_size) const;
};

// FP8 dequantization scales of a layer: [1] (per tensor) or [num_kv_heads] (per head) float32, on
// the cache's device. Undefined views mean 1.0.
struct KVScales {
  TensorView k_scale;
  TensorView v_scale;
  // forward's fp8_e4m3 query (vLLM's q_descale): [1] or [num_reqs, num_kv_heads] (any strides)
  // float32 on the query's device; the query is q_scale times its values. Only beside such a query.
  TensorView q_scale = {};
};

class AttentionImpl {
 public:
  virtual ~AttentionImpl() = default;
  const AttentionImplParams& params() const { return params_; }
  // The kernel generation this impl runs ("cpu", "v2", "v3"; "v3/v2" for a GPU backend whose
  // launches used both, or that prefers v3 and has not launched yet), for reports.
  virtual std::string_view kernel_generation() const = 0;

  // Writes key/value [num_tokens, Hkv, D] into the paged cache at slot_mapping [num_tokens] int64
  // (-1 skipped), encoding to the cache dtype (FP8: saturate(x / scale), round to nearest even).
  // kv_cache: one tensor [num_blocks, 2, block_size, Hkv, D] or K and V as two (KVCacheView).
  virtual Status do_kv_cache_update(const TensorView& key, const TensorView& value,
                                    const KVCacheView& kv_cache, const TensorView& slot_mapping,
                                    const KVScales& scales, StreamHandle stream = nullptr) = 0;

  // query [num_tokens, Hq, D] of the layer's dtype, or fp8_e4m3 (vLLM's FP8 attention: its scale
  // in scales.q_scale) over a layer of another dtype; output [num_tokens, Hq, D] (the layer's
  // dtype); output_lse optional [Hq, num_tokens] float32, natural log (undefined = not requested).
  // An e4m3 query goes as it is to the FP8 tensor cores where they run the launch
  // (fp8_tensor_cores), and is dequantized for every other kernel (dequantize_fp8_query's values).
  // key/value are the new tokens (already in the cache; encoder attention without a cache reads
  // them directly).
  virtual Status forward(const TensorView& query, const TensorView& key, const TensorView& value,
                         const KVCacheView& kv_cache, const AttentionMetadata& metadata,
                         const TensorView& output, const TensorView& output_lse,
                         const KVScales& scales, StreamHandle stream = nullptr) = 0;

 protected:
  explicit AttentionImpl(AttentionImplParams params) : params_(std::move(params)) {}
  AttentionImplParams params_;
};

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual std::string_view name() const = 0;  // "FLASH_ATTN", "FLASHINFER", "CPU_ATTN"

  virtual std::vector<DType> supported_dtypes() const = 0;
  virtual std::vector<KVCacheDType> supported_kv_cache_dtypes() const = 0;
  virtual std::vector<MultipleOf> supported_kernel_block_sizes() const = 0;
  virtual bool supports_head_size(int head_size) const = 0;
  virtual std::string supported_head_sizes_text()
      const = 0;  // for messages: "multiples of 8 up to 256"
  virtual bool supports_kv_cache_dtype(KVCacheDType kv,
                                       const AttentionSelectorConfig& config) const;
  bool supports_dtype(DType dtype) const;
  bool supports_block_size(std::optional<int> block_size) const;
  int preferred_block_size(int default_block_size) const;

  virtual bool supports_sink() const { return false; }
  virtual bool supports_alibi() const { return false; }
  virtual bool supports_sliding_window() const { return false; }
  virtual bool supports_soft_cap() const { return false; }
  virtual bool supports_non_causal() const { return false; }
  virtual bool supports_per_head_quant_scales() const { return false; }
  // Decode context parallelism: forward under a dcp_group, metadata of a sharded step.
  virtual bool supports_dcp() const { return false; }
  virtual bool supports_attn_type(AttentionType type) const {
    return type == AttentionType::kDecoder;
  }
  virtual bool supports_device(DeviceKind kind) const = 0;
  virtual bool supports_compute_capability(ComputeCapability cc) const { return true; }
  // A reason the combination cannot be served, beyond the single predicates.
  virtual std::optional<std::string> supports_combination(
      const AttentionSelectorConfig& config) const {
    return std::nullopt;
  }
  // Set when this build cannot run the backend at all ("not built in this version", ...).
  virtual std::optional<std::string> unavailable_reason() const { return std::nullopt; }
  // The kernel generations this build has for the backend, for `info` ("v2 (mma.sync, sm_80+)").
  virtual std::vector<std::string> kernel_generations() const { return {}; }
  // Which of them would run for `config`, for `select` ("" when it cannot say).
  virtual std::string kernel_generation_for(const AttentionSelectorConfig& config) const {
    return "";
  }

  // Every reason this backend cannot serve `config`, in vLLM's order and wording; empty = valid.
  std::vector<std::string> validate_configuration(const AttentionSelectorConfig& config) const;

  virtual StatusOr<KVCacheShape> get_kv_cache_shape(int64_t num_blocks, int block_size,
                                                    int num_kv_heads, int head_size,
                                                    KVCacheDType cache_dtype) const;
  virtual KVCacheStrideOrder get_kv_cache_stride_order(KVCacheLayout layout) const {
    return pagedattn::get_kv_cache_stride_order(layout);
  }
  virtual std::optional<KVCacheLayout> required_kv_cache_layout() const { return std::nullopt; }
  virtual bool forward_includes_kv_cache_update() const { return false; }

  virtual StatusOr<std::unique_ptr<AttentionMetadataBuilder>> make_builder(
      const BuilderParams& params) const = 0;
  virtual StatusOr<std::unique_ptr<AttentionImpl>> make_impl(
      const AttentionImplParams& params) const = 0;
};

// The registry: FLASH_ATTN, FLASHINFER and CPU_ATTN, in that order.
std::span<const AttentionBackend* const> registered_backends();
// By registry name or alias ("FLASH_ATTN" / "flash_attn", "FLASHINFER" / "flashinfer",
// "CPU_ATTN" / "cpu"); nullptr if unknown.
const AttentionBackend* find_backend(std::string_view name);

}  // namespace pagedattn
