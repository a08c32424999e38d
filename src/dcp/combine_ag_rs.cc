// The ag_rs combine on the host: all-gather LSEs, scale, reduce-scatter over heads.
#include <vector>

#include "common/numeric.h"
#include "dcp/combine_paths.h"
#include "dcp/host_views.h"
#include "dcp/lse_weights.h"

namespace pagedattn::dcp {

Status combine_ag_rs_on_host(Communicator& comm, const CombineShape& shape,
                             const TensorView& partial_out, const TensorView& partial_lse,
                             const TensorView& out, const TensorView& out_lse) {
  const int world_size = comm.world_size();
  const int rank = comm.rank();
  const auto [num_tokens, num_heads, head_size, heads_per_rank] = shape;

  // Every rank's LSEs [N, H, T]: the collective needs this rank's as one contiguous block.
  HostScratch local_lse(DType::kF32, num_heads * num_tokens);
  auto* local = local_lse.view.data_as<float>();
  for (int64_t h = 0; h < num_heads; ++h) {
    for (int64_t t = 0; t < num_tokens; ++t) {
      local[h * num_tokens + t] = partial_lse.data_as<const float>()[offset2(partial_lse, h, t)];
    }
  }
  HostScratch all_lse(DType::kF32, world_size * num_heads * num_tokens);
  PAGEDATTN_RETURN_IF_ERROR(comm.all_gather(local_lse.view, all_lse.view));

  // This rank's output scaled by its weight, laid out [N, T, H / N, D] so that chunk s is what
  // rank s receives.
  const DType dtype = partial_out.dtype();
  HostScratch scaled(dtype, num_tokens * num_heads * head_size);
  std::vector<float> lses(world_size);
  std::vector<float> weights(world_size);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t h = 0; h < num_heads; ++h) {
      for (int s = 0; s < world_size; ++s) {
        lses[s] = all_lse.view.data_as<const float>()[(s * num_heads + h) * num_tokens + t];
      }
      const float global_lse = lse_weights(lses, weights);
      const int64_t slice = h / heads_per_rank;
      const int64_t head_in_slice = h % heads_per_rank;
      if (slice == rank) {
        out_lse.data_as<float>()[offset2(out_lse, head_in_slice, t)] = global_lse;
      }
      const int64_t base = ((slice * num_tokens + t) * heads_per_rank + head_in_slice) * head_size;
      const float w = weights[rank];
      for (int64_t d = 0; d < head_size; ++d) {
        // A rank that adds nothing sends exact zeros, whatever its output holds.
        const float value =
            w == 0.0f ? 0.0f
                      : w * load_as_float(partial_out.data(), dtype, offset3(partial_out, t, h, d));
        store_from_float(scaled.view.data(), dtype, base + d, value);
      }
    }
  }
  const TensorView out_flat(out.data(), dtype, Device::cpu(), {out.numel()});
  return comm.reduce_scatter(scaled.view, out_flat);
}

}  // namespace pagedattn::dcp
