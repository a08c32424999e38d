// Layer checks for DCP (layer_checks.h).
#include "dcp/layer_checks.h"

#include <string>

#include "pagedattn/communicator.h"
#include "pagedattn/dcp_heads.h"

namespace pagedattn::dcp {

Status check_dcp_layer(const AttentionImplParams& p) {
  if (p.dcp_comm_backend != DcpCommBackend::kAgRs && p.dcp_comm_backend != DcpCommBackend::kA2a) {
    return invalid_argument("dcp_comm_backend = " +
                            std::to_string(static_cast<int>(p.dcp_comm_backend)) +
                            " (allowed: ag_rs, a2a)");
  }
  if (p.dcp_group == nullptr) return ok_status();
  const std::string group =
      " with a dcp_group of world size " + std::to_string(p.dcp_group->world_size());
  if (p.attn_type != AttentionType::kDecoder) {
    return invalid_argument("attn_type = " + std::string(attention_type_name(p.attn_type)) +
                            group +
                            ": DCP shards the KV cache of decoder layers (allowed: decoder)");
  }
  if (!p.alibi_slopes.empty()) {
    return invalid_argument("alibi_slopes given" + group +
                            ": a rank's keys are not at contiguous positions, which ALiBi's "
                            "distances need (allowed: none under DCP)");
  }
  return check_dcp_head_split(p.num_heads, p.num_kv_heads, p.dcp_group->world_size());
}

}  // namespace pagedattn::dcp
