// Decode context parallelism in the serve loop: N simulated ranks in this process (threads over
// the in-process communicator) on CPU_ATTN, each with 1/N of every sequence's tokens in its own KV
// cache and 1/N of the query heads, beside the same step at N = 1. The engine's blocks hold
// block_size * N tokens (vLLM's virtual blocks): every rank uses the same block table, each block
// id naming a block of block_size tokens in its own cache, and its own slot mapping.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pagedattn/attention_layer.h"
#include "pagedattn/backend.h"
#include "pagedattn/kv_cache.h"
#include "serve/executor.h"
#include "testing/counted_communicator.h"

namespace pagedattn::serve {

struct DcpConfig {
  int world_size = 1;  // N ranks; 1 = no DCP
  DcpCommBackend comm_backend = DcpCommBackend::kAgRs;
};

class DcpExecutor : public StepExecutor {
 public:
  // config.model.block_size is a rank's block; config.num_blocks counts the engine's blocks.
  static StatusOr<std::unique_ptr<DcpExecutor>> create(const ExecutorConfig& config,
                                                       const DcpConfig& dcp);

  std::string label() const override;
  const Device& device() const override { return single_->device(); }
  std::optional<int> reorder_threshold() const override { return single_->reorder_threshold(); }
  int table_width() const override { return single_->table_width(); }
  const std::string& graph_error() const override { return single_->graph_error(); }

  // The N = 1 step first (its time is single_rank_ms), then the ranks on the same Q/K/V. Neither
  // runs cascade: DCP shards the shared prefix like any context (vLLM turns cascade off too).
  StatusOr<StepResult> run_step(const StepBatch& batch) override;
  // The ranks' outputs, every layer.
  StatusOr<uint64_t> output_digest(const StepBatch& batch) override;
  // The float64 oracle on the N = 1 run, then every rank's heads of `layer` against N = 1's.
  StatusOr<std::vector<std::string>> check(const StepBatch& batch, int layer,
                                           std::span<const int> positions, int max_rows) override;

  int64_t rank_kv_cache_bytes() const;  // one rank's caches, every layer
  int64_t single_rank_kv_cache_bytes() const { return single_->kv_cache_bytes(); }

 private:
  struct Rank {
    std::unique_ptr<testing::CountedCommunicator> comm;
    std::vector<AttentionLayer> layers;                               // per layer group
    std::vector<std::unique_ptr<AttentionMetadataBuilder>> builders;  // per layer group
    std::vector<std::unique_ptr<AttentionMetadata>> metadata;         // per layer group
    std::vector<KVCacheAllocation> caches;                            // per layer
    std::vector<std::unique_ptr<AttentionImpl>> impls;                // per layer
    std::vector<std::vector<uint16_t>> outputs;  // per layer: [max tokens, Hq, D], f16 or bf16
    std::vector<int64_t> slots;                  // the step's slot mapping on this rank
  };

  DcpExecutor() = default;
  Status make_rank(const ExecutorConfig& config, int rank);
  // Runs body(rank) for every rank, each on its own thread; the first failure, naming its rank.
  Status on_every_rank(const std::function<Status(Rank&, int)>& body);
  CommonAttentionMetadata rank_metadata(const StepBatch& batch, Rank& rank) const;
  Status run_rank_layers(const StepBatch& batch, Rank& rank, int r);
  TensorView rank_output(const Rank& rank, int layer, int64_t tokens) const;

  ModelShape model_;  // block_size is a rank's block
  DcpConfig dcp_;
  const AttentionBackend* backend_ = nullptr;
  std::unique_ptr<Executor> single_;  // N = 1 over the engine's blocks of block_size * N tokens
  std::vector<std::unique_ptr<Communicator>> group_;
  std::vector<Rank> ranks_;
  std::vector<int> group_of_layer_;
  int max_tokens_ = 0;
  float one_ = 1.0f;  // the caches' k and v scale
};

}  // namespace pagedattn::serve
