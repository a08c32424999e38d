// One case run through a backend the way an engine would: select, make the builder and impl, build
// the metadata, write the new tokens into the cache, run forward, and compare with the oracle.
// `check`, `bench` and `demo` share it; the tensors live where the backend runs (Placement).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pagedattn/backend.h"
#include "pagedattn/config.h"  // PAGEDATTN_WITH_CUDA
#include "pagedattn/selector.h"
#include "reference/compare.h"
#include "testing/case_spec.h"
#include "testing/host_batch.h"

namespace pagedattn::cli {

// The tensors of one case on the backend's device.
struct Operands {
  TensorView query, key, value, kv_cache;
  TensorView output;  // [T, Hq, D] dtype
  TensorView lse;     // [Hq, T] f32
  KVScales scales;
  CommonAttentionMetadata meta;
};

class Placement {
 public:
  virtual ~Placement() = default;
  virtual const Operands& operands() const = 0;
  virtual Status poison_outputs() = 0;  // NaN into output and LSE
  virtual Status synchronize() = 0;
  // Output, LSE and the cache back into host tensors (a no-op on the host).
  virtual Status download(testing::HostBatch& batch, testing::HostTensor& output,
                          testing::HostTensor& lse) = 0;
  // Milliseconds of each of `repeats` calls of fn after `warmup` calls.
  virtual StatusOr<std::vector<double>> time_ms(const std::function<Status()>& fn, int warmup,
                                                int repeats) = 0;
};

std::unique_ptr<Placement> place_on_host(testing::HostBatch& batch, testing::HostTensor& output,
                                         testing::HostTensor& lse);
#if PAGEDATTN_WITH_CUDA
StatusOr<std::unique_ptr<Placement>> place_on_cuda(const testing::HostBatch& batch,
                                                   int device_index);
#endif

// Whether build() gets the case's common_prefix_len: as the engine decides (the builder's
// use_cascade_attention rule), always, or never.
enum class CascadeMode { kAuto, kAlways, kNever };

class CaseRun {
 public:
  // Selects the backend ("auto" or a name), reorders the batch if the backend wants decodes first,
  // makes the random batch and places it on the backend's device. Errors here are bad input.
  static StatusOr<std::unique_ptr<CaseRun>> prepare(const testing::CaseSpec& spec,
                                                    const std::string& backend,
                                                    CascadeMode cascade = CascadeMode::kAuto);

  Status build();         // builder.build(cascade_prefix_len(), metadata); errors are bad input
  Status update_cache();  // impl.do_kv_cache_update (unless forward includes it)
  Status forward(bool with_lse);
  // update, forward with LSE, synchronize, download.
  Status execute();
  // poison, build, execute: the whole step once.
  Status run_step();
  // The float64 oracle on the cache after the update, compared with the output.
  StatusOr<reference::Comparison> verify() const;

  const testing::CaseSpec& spec() const { return batch_.spec; }  // after any reorder
  const testing::HostBatch& batch() const { return batch_; }
  const testing::HostTensor& output() const { return output_; }
  const testing::HostTensor& lse() const { return lse_; }
  const AttentionBackend& backend() const { return *backend_; }
  std::string_view kernel_generation() const { return impl_->kernel_generation(); }
  std::string backend_label() const;  // "CPU_ATTN (cpu)", "FLASH_ATTN (v2, cascade)"
  const Device& device() const { return device_; }
  int cascade_prefix_len() const { return cascade_prefix_len_; }  // 0 = no cascade asked
  Placement& placement() { return *placement_; }

 private:
  CaseRun() = default;
  testing::HostBatch batch_;
  const AttentionBackend* backend_ = nullptr;
  Device device_;
  std::unique_ptr<AttentionMetadataBuilder> builder_;
  std::unique_ptr<AttentionImpl> impl_;
  std::unique_ptr<AttentionMetadata> metadata_;
  testing::HostTensor output_, lse_;
  std::unique_ptr<Placement> placement_;
  int cascade_prefix_len_ = 0;
};

// The order vLLM's scheduler would run the batch in for a backend with this decode threshold
// (decodes first); the case itself when nothing moves.
testing::CaseSpec reorder_decode_first(const testing::CaseSpec& spec, int decode_threshold);

// Fills a host float tensor (any float dtype) with NaN.
void fill_nan(const testing::HostTensor& tensor);

}  // namespace pagedattn::cli
