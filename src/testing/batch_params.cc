#include "testing/batch_params.h"

#include <algorithm>

namespace pagedattn::testing {

BuilderParams builder_params_for(const CaseSpec& spec, const Device& device) {
  BuilderParams bp = builder_params(attention_layer_for(spec, KVCacheLayout::kNHD, device));
  bp.max_num_reqs = std::max(bp.max_num_reqs, spec.num_reqs());
  bp.max_num_tokens = static_cast<int>(std::max<int64_t>(bp.max_num_tokens, spec.num_tokens()));
  for (int len : spec.seq_lens) bp.max_model_len = std::max(bp.max_model_len, len);
  return bp;
}


reference::ReferenceInputs reference_inputs(const HostBatch& batch, const TensorView& kv_cache) {
  reference::ReferenceInputs in;
  in.query = batch.query.view();
  in.kv_cache = kv_cache;
  in.block_table = batch.block_table.view();
  in.seq_lens = batch.seq_lens.view();
  in.query_start_loc = batch.query_start_loc.view();
  in.scales = batch.scales();
  in.causal = batch.spec.causal;
  return in;
}

}  // namespace pagedattn::testing
