// A GPU builder's persistent device buffers, sized once from BuilderParams so that every step's
// metadata lives at the same addresses (what a captured CUDA graph replays against): the split-KV
// workspace and the cascade sequence's buffers. Needs the CUDA runtime (include from *_cuda.cc).
//
// Ordering: the copies go with cudaMemcpyAsync on the legacy default stream, which waits for
// earlier work on every blocking stream (the previous step's forward may still read these buffers)
// and is waited for by later work. Callers that run forward on non-blocking streams must order
// build() against them themselves, as with any persistent-buffer builder.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backends/common_prefix.h"
#include "backends/gpu/metadata.h"
#include "plan/split_kv.h"
#include "runtime/device_buffer.h"

namespace pagedattn::gpu {

// The SM count a builder plans for: BuilderParams::num_sms when given (tests, other GPUs), else
// the device's.
StatusOr<int> builder_sm_count(const BuilderParams& params);

// Copies host int32s into a device buffer on the legacy default stream (the staging vector must
// stay alive until the copy has read it: pageable copies have when cudaMemcpyAsync returns).
Status copy_ints_to_device(const std::vector<int32_t>& host, const runtime::DeviceBuffer& device,
                           const std::string& what);

// The split-KV partials of a step, laid out by plan::split_workspace_layout.
class SplitWorkspace {
 public:
  static StatusOr<SplitWorkspace> allocate(int device, const plan::SplitWorkspaceLayout& layout);
  SplitWorkspaceView view() const;

 private:
  runtime::DeviceBuffer out_;  // [layout.out_floats] f32
  runtime::DeviceBuffer lse_;  // [layout.lse_floats] f32
  int64_t token_capacity_ = 0;
};

// The builder side of cascade: the suffix lengths, the prefix pass's one-request metadata
// ({0, T} cu_seqlens, {common_prefix_len} seqused, then the backend's own ints) and the two passes'
// output scratch (allocated on the first cascade step, then reused).
class CascadeBuilder {
 public:
  static StatusOr<CascadeBuilder> create(std::string backend, const BuilderParams& params,
                                         backends::CascadeFeatures served, int prefix_extra_ints);

  // The step's cascade on the host: checks common_prefix_len (the one contract, and the features
  // this backend's passes serve) and computes the suffix lengths. 0 gives a disabled cascade.
  StatusOr<CascadeMetadata> plan(int common_prefix_len, const CommonAttentionMetadata& meta,
                                 std::span<const int32_t> query_start_loc,
                                 std::span<const int32_t> seq_lens);
  // After plan(): each request's keys after the prefix (host), for the backend's own planning.
  std::span<const int32_t> suffix_seq_lens() const { return suffix_seq_host_; }
  // After plan(): copies the prefix pass's ints (prefix_extra_ints backend ints last) and the
  // suffix lengths to the device.
  Status upload(std::span<const int32_t> prefix_extra);
  // After plan() of an enabled cascade, for backends whose passes are paged attention launches
  // (prefix_extra_ints = 1, the prefix pass's split count): returns the prefix pass (one
  // non-causal request of every query token over block-table row 0's first prefix_blocks blocks,
  // split like a long query), uploads, and turns `main` into the suffix pass (each request over
  // its keys after the prefix).
  StatusOr<PassMetadata> split_passes(const CascadeMetadata& c, const plan::SplitKVConfig& config,
                                      int num_sms, PassMetadata& main);

 private:
  Status ensure_scratch();

  std::string backend_;
  BuilderParams params_;
  backends::CascadeFeatures served_;
  int prefix_extra_ints_ = 0;
  runtime::DeviceBuffer prefix_ints_;              // [3 + prefix_extra_ints] int32
  runtime::DeviceBuffer suffix_seq_;               // [max_num_reqs] int32
  runtime::DeviceBuffer prefix_out_, suffix_out_;  // [max_num_tokens, Hq, D] dtype
  runtime::DeviceBuffer prefix_lse_, suffix_lse_;  // [Hq, max_num_tokens] f32
  std::vector<int32_t> prefix_ints_host_;
  std::vector<int32_t> suffix_seq_host_;
};

}  // namespace pagedattn::gpu
