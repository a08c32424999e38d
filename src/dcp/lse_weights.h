// The merge of N partial attentions by their LSEs (attention.md), one row at a time: the one rule
// both DCP combine paths use, so they agree on empty ranks and NaN.
#pragma once

#include <span>

namespace pagedattn::dcp {

// Given each rank's natural-log LSE of one (token, head) row, writes each rank's weight in the
// combined output (they sum to 1) and returns the combined LSE. An LSE of -inf or +inf is an
// empty rank: weight 0. All empty: rank 0 weighs 1, the LSE is -inf. A NaN LSE: every weight and
// the LSE are NaN.
float lse_weights(std::span<const float> lses, std::span<float> weights);

}  // namespace pagedattn::dcp
