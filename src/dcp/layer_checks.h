// The layer parameters decode context parallelism needs, whatever the backend (docs/dcp.md).
#pragma once

#include "pagedattn/backend.h"

namespace pagedattn::dcp {

// dcp_comm_backend is ag_rs or a2a; with a dcp_group: a decoder layer (DCP shards the cache that
// decoder layers read), no ALiBi (a rank's keys are not at contiguous positions) and heads that
// split over the group (check_dcp_head_split). Each error names the field, its value and what is
// allowed.
Status check_dcp_layer(const AttentionImplParams& params);

}  // namespace pagedattn::dcp
