// Names of the collectives (used in every Communicator message).
#include "pagedattn/communicator.h"

namespace pagedattn {

std::string_view collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
  }
  return "unknown collective";
}

}  // namespace pagedattn
