// One scheduling step of one case on one backend, the way an engine drives it: make the builder
// and impl, build the metadata, write the new tokens into the cache, run forward, and compare with
// the float64 oracle. The CLI, the CPU tests, the GPU tests and the parity test all run steps
// through it; the tensors live where the backend runs (a Placement: host, or a CUDA device).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pagedattn/backend.h"
#include "reference/compare.h"
#include "testing/case_spec.h"
#include "testing/host_batch.h"

namespace pagedattn::testing {

// The tensors of one step on the backend's device.
struct StepOperands {
  TensorView query, key, value, kv_cache;
  TensorView output;  // [T, Hq, D] dtype
  TensorView lse;     // [Hq, T] f32
  KVScales scales;
  CommonAttentionMetadata meta;
};

class Placement {
 public:
  virtual ~Placement() = default;
  virtual const StepOperands& operands() const = 0;
  virtual Status poison_outputs() = 0;  // NaN into output and LSE
  virtual Status synchronize() = 0;
  // Output, LSE and the cache back into the host tensors (a no-op on the host).
  virtual Status download(HostBatch& batch, HostTensor& output, HostTensor& lse) = 0;
  // Milliseconds of each of `repeats` calls of fn after `warmup` calls.
  virtual StatusOr<std::vector<double>> time_ms(const std::function<Status()>& fn, int warmup,
                                                int repeats) = 0;
};

// Whether build() gets the case's common_prefix_len: as an engine decides (the builder's
// use_cascade_attention), always, or never.
enum class CascadeMode { kAuto, kAlways, kNever };

struct StepOptions {
  CascadeMode cascade = CascadeMode::kAuto;
  std::optional<AttentionType> attn_type;       // overrides the batch's (encoder tests)
  std::optional<BuilderParams> builder_params;  // unset: testing::builder_params_for the case
  int kernel_generation = 0;  // AttentionImplParams::kernel_generation (0: the backend chooses)
  bool fp8_tensor_cores = false;  // AttentionImplParams::fp8_tensor_cores (an e4m3 cache's cases)
};

class StepRunner {
 public:
  // Makes the builder (reordering the case decode-first when it asks), the random batch with its
  // cache in `layout`, the impl, and places the batch on `device`. Errors here are bad input.
  static StatusOr<std::unique_ptr<StepRunner>> prepare(const CaseSpec& spec,
                                                       const AttentionBackend& backend,
                                                       const Device& device, KVCacheLayout layout,
                                                       const StepOptions& options = {});
  // The same over a batch the caller made (and may have changed); the runner works on it in place
  // and the caller keeps it alive.
  static StatusOr<std::unique_ptr<StepRunner>> for_batch(HostBatch& batch,
                                                         const AttentionBackend& backend,
                                                         const Device& device,
                                                         const StepOptions& options = {});

  Status build();         // builder.build(cascade_prefix_len(), metadata); errors are bad input
  Status update_cache();  // impl.do_kv_cache_update (unless forward includes it)
  Status forward(bool with_lse);
  // [update,] forward, synchronize, download.
  Status execute(bool write_cache = true, bool with_lse = true);
  // forward over another query with other scales (an e4m3 query's tests; the cache as written),
  // synchronize, download.
  Status execute(const TensorView& query, const KVScales& scales, bool with_lse = true);
  // poison, build, execute: the whole step once.
  Status run_step(bool write_cache = true, bool with_lse = true);
  // The float64 oracle on the batch's cache (after the update) against the output, and the LSE
  // when the last forward asked for it.
  StatusOr<reference::Comparison> verify() const;

  const CaseSpec& spec() const { return batch_->spec; }  // after any reorder
  HostBatch& batch() const { return *batch_; }
  const HostTensor& output() const { return output_; }
  const HostTensor& lse() const { return lse_; }
  const AttentionBackend& backend() const { return *backend_; }
  const AttentionImplParams& impl_params() const { return impl_->params(); }
  std::string_view kernel_generation() const { return impl_->kernel_generation(); }
  std::string backend_label() const;  // "CPU_ATTN (cpu)", "FLASH_ATTN (v2, cascade)"
  const Device& device() const { return device_; }
  int cascade_prefix_len() const { return cascade_prefix_len_; }  // 0 = no cascade asked
  Placement& placement() { return *placement_; }

 private:
  StepRunner() = default;
  Status init(const BuilderParams& builder_params, const StepOptions& options);

  std::optional<HostBatch> owned_batch_;
  HostBatch* batch_ = nullptr;
  const AttentionBackend* backend_ = nullptr;
  Device device_;
  std::unique_ptr<AttentionMetadataBuilder> builder_;
  std::unique_ptr<AttentionImpl> impl_;
  std::unique_ptr<AttentionMetadata> metadata_;
  HostTensor output_, lse_;
  std::unique_ptr<Placement> placement_;
  int cascade_prefix_len_ = 0;
  bool with_lse_ = true;
};

std::unique_ptr<Placement> place_on_host(HostBatch& batch, HostTensor& output, HostTensor& lse);
// CUDA builds; Unimplemented without CUDA.
StatusOr<std::unique_ptr<Placement>> place_on_cuda(const HostBatch& batch, int device_index);

// The order vLLM's scheduler would run the batch in for a backend with this decode threshold
// (decodes first); the case itself when nothing moves.
CaseSpec reorder_decode_first(const CaseSpec& spec, int decode_threshold);

// Fills a host float tensor (any float dtype) with NaN.
void fill_nan(const HostTensor& tensor);

}  // namespace pagedattn::testing
