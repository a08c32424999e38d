// The limits a builder is given (BuilderParams::max_num_reqs, max_num_tokens, max_model_len): the
// steps its persistent buffers cover. Every backend's builder enforces them, whether or not it
// keeps such buffers, so a limit means the same on every backend.
#pragma once

#include "pagedattn/backend.h"

namespace pagedattn::backends {

// make_builder: each limit is positive and max_num_splits is not negative (an InvalidArgument naming
// it otherwise).
Status check_limits(const BuilderParams& params);

// build(): the step fits every limit (an InvalidArgument naming the limit and the step's value).
// max_seq_len is the step's upper bound, as vLLM's builders read it.
Status check_step_limits(const BuilderParams& params, const CommonAttentionMetadata& meta);

}  // namespace pagedattn::backends
