// The attention side of the serve loop, written the way an engine uses the public API: the
// selector picks the backend, each layer gets a KV cache of the backend's shape and layout, each
// KV-cache group a metadata builder, each layer an impl. Per step: upload the step's metadata and
// fresh Q/K/V into persistent buffers, builder.build once per group (with the shared prefix when
// the builder's cascade rule says so), then do_kv_cache_update + forward for every layer, or, on a
// decode-only step where the builder supports CUDA graphs, replay the step's captured graph.
#pragma once

#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "pagedattn/backend.h"
#include "pagedattn/kv_cache.h"
#include "serve/device_ops.h"
#include "serve/model.h"
#include "serve/step_batch.h"
#include "serve/step_executor.h"

namespace pagedattn::serve {

struct ExecutorConfig {
  ModelShape model;
  std::string backend = "auto";  // "auto" or a registered name/alias
  int num_blocks = 1024;         // per layer, block 0 included
  int max_num_seqs = 32;
  int max_num_batched_tokens = 1024;
  bool cuda_graphs = true;
  uint64_t seed = 1;
};

class Executor : public StepExecutor {
 public:
  static StatusOr<std::unique_ptr<Executor>> create(const ExecutorConfig& config);

  std::string label() const override;
  const Device& device() const override { return device_; }
  std::optional<int> reorder_threshold() const override;
  int table_width() const override { return table_width_; }
  const std::string& graph_error() const override { return graph_error_; }

  StatusOr<StepResult> run_step(const StepBatch& batch) override;
  StatusOr<uint64_t> output_digest(const StepBatch& batch) override;
  StatusOr<std::vector<std::string>> check(const StepBatch& batch, int layer,
                                           std::span<const int> positions, int max_rows) override;

  // The last step's Q [T, Hq, D], K and V [T, Hkv, D] and layer `layer`'s output [T, Hq, D], on
  // the executor's device: what a DCP run feeds its ranks and compares them with.
  TensorView step_query(int64_t tokens) const;
  TensorView step_key(int64_t tokens) const;
  TensorView step_value(int64_t tokens) const;
  TensorView step_output(int layer, int64_t tokens) const;
  // Bytes of every layer's KV cache.
  int64_t kv_cache_bytes() const;

 private:
  struct Group {
    std::vector<int> layers;
    SlidingWindow window;
    std::unique_ptr<AttentionMetadataBuilder> builder;
    std::unique_ptr<AttentionMetadata> metadata;
  };
  struct Buffers {  // persistent, at fixed addresses for the whole run (graphs replay them)
    void *query, *key, *value, *qsl, *seq_lens, *block_table, *slots, *scale;
    std::vector<void*> outputs;  // [num_layers] of [max tokens, Hq, D]
  };

  Executor() = default;
  Status check_memory(const ExecutorConfig& config, const KVCacheShape& shape) const;
  Status allocate(const ExecutorConfig& config);
  StepBatch pad_for_graph(const StepBatch& batch, int num_reqs) const;
  Status upload(const StepBatch& batch);
  CommonAttentionMetadata metadata_for(const StepBatch& batch) const;
  Status run_layers(const StepBatch& batch);
  int graph_batch_size(int num_reqs) const;  // 0 = no graph for this size
  double kv_bytes_read(const StepBatch& batch, int cascade_prefix_len) const;
  TensorView rows(void* data, int64_t tokens, int heads) const;

  ModelShape model_;
  const AttentionBackend* backend_ = nullptr;
  Device device_;
  std::unique_ptr<DeviceOps> ops_;
  std::vector<KVCacheAllocation> caches_;              // [num_layers]
  std::vector<std::unique_ptr<AttentionImpl>> impls_;  // [num_layers]
  std::vector<int> group_of_layer_;
  std::vector<Group> groups_;
  Buffers buf_{};
  std::vector<uint16_t> pool_;  // random 16-bit elements (dtype's encoding), uploaded once
  void* pool_device_ = nullptr;
  std::mt19937_64 rng_;
  int64_t q_offset_ = 0, k_offset_ = 0, v_offset_ = 0;  // the last step's pool offsets
  int max_tokens_ = 0, max_reqs_ = 0, table_width_ = 0, num_sms_ = 1;
  bool graphs_ = false;
  std::string graph_error_;
  DType storage_ = DType::kBF16;
};

}  // namespace pagedattn::serve
