// DCP's split of query heads over ranks (dcp_heads.h).
#include <algorithm>
#include <string>

#include "pagedattn/dcp_heads.h"

namespace pagedattn {

Status check_dcp_head_split(int num_heads, int num_kv_heads, int world_size) {
  if (num_heads <= 0 || num_kv_heads <= 0 || num_heads % num_kv_heads != 0) {
    return invalid_argument("num_heads = " + std::to_string(num_heads) +
                            " must be a positive multiple of num_kv_heads = " +
                            std::to_string(num_kv_heads));
  }
  if (num_kv_heads % world_size != 0 && world_size % num_kv_heads != 0) {
    return invalid_argument(
        "num_kv_heads = " + std::to_string(num_kv_heads) + " with dcp_world_size = " +
        std::to_string(world_size) +
        ": a rank's query heads would straddle KV-head groups unevenly (allowed: num_kv_heads a "
        "multiple or a divisor of dcp_world_size)");
  }
  return ok_status();
}

DcpKvHeads dcp_kv_heads_of_rank(int num_kv_heads, int world_size, int rank) {
  // Group head r * Hq reads KV head r * Hq / (N * Hq / Hkv) = r * Hkv / N.
  return {rank * num_kv_heads / world_size, std::max(1, num_kv_heads / world_size)};
}

}  // namespace pagedattn
