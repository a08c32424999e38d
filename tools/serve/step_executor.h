// What the engine loop asks of the attention side each step: run the step's batch, check it against
// the oracle, and the few facts the scheduler needs (table width, batch order). Executor runs one
// backend; DcpExecutor runs N simulated DCP ranks beside the same step at N = 1.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pagedattn/status.h"
#include "pagedattn/types.h"
#include "serve/step_batch.h"

namespace pagedattn::serve {

struct StepResult {
  double attention_ms = 0.0;  // cache update + attention over every layer (or the graph replay)
  double build_ms = 0.0;      // builder.build for every group (host)
  bool cascade = false;       // build() got the shared prefix
  bool graph = false;         // replayed a CUDA graph
  int graph_batch = 0;        // the padded batch size it replayed
  double kv_bytes = 0.0;      // cache bytes the layers read
  // Under DCP: the bytes one rank received from the others over every layer, and the attention time
  // of the same step at N = 1.
  double dcp_received_bytes = 0.0;
  double single_rank_ms = 0.0;
};

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;

  virtual std::string label() const = 0;  // "FLASH_ATTN (v2)"
  virtual const Device& device() const = 0;
  // The strictest reorder_batch_threshold of the groups' builders; unset = keep the order.
  virtual std::optional<int> reorder_threshold() const = 0;
  virtual int table_width() const = 0;
  // Why graphs were turned off during the run (a capture failed); empty if they were not.
  virtual const std::string& graph_error() const = 0;

  virtual StatusOr<StepResult> run_step(const StepBatch& batch) = 0;
  // FNV-1a of every layer's output rows of the last step (reproducibility checks).
  virtual StatusOr<uint64_t> output_digest(const StepBatch& batch) = 0;
  // The float64 oracle on `layer` for the requests at batch positions `positions` (their last
  // `max_rows` query rows), against the last step's output. A message per failing request.
  virtual StatusOr<std::vector<std::string>> check(const StepBatch& batch, int layer,
                                                   std::span<const int> positions,
                                                   int max_rows) = 0;
};

}  // namespace pagedattn::serve
