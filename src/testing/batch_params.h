// What a backend's builder and the float64 oracle need to know about a HostBatch, assembled in one
// place for the tools and the tests.
#pragma once

#include "pagedattn/backend.h"
#include "reference/attention_ref.h"
#include "testing/host_batch.h"

namespace pagedattn::testing {

// The case's model and cache in `layout` on `device`, with persistent buffers sized for at least
// this step (and the library's defaults when those are larger).
BuilderParams builder_params_for(const CaseSpec& spec, const Device& device);


// The oracle's inputs over the batch, reading `kv_cache` (a host view of the cache after the update).
reference::ReferenceInputs reference_inputs(const HostBatch& batch, const TensorView& kv_cache);

}  // namespace pagedattn::testing
