// The a2a combine on the host: all-to-all of outputs and LSEs by head slice, then a local merge.
#include <cstring>
#include <vector>

#include "common/numeric.h"
#include "dcp/combine_paths.h"
#include "dcp/host_views.h"
#include "dcp/lse_weights.h"

namespace pagedattn::dcp {

Status combine_a2a_on_host(Communicator& comm, const CombineShape& shape,
                           const TensorView& partial_out, const TensorView& partial_lse,
                           const TensorView& out, const TensorView& out_lse) {
  const int world_size = comm.world_size();
  const auto [num_tokens, num_heads, head_size, heads_per_rank] = shape;
  const DType dtype = partial_out.dtype();
  const size_t element = dtype_size(dtype);

  // Send layouts: outputs [N, T, H / N, D] and LSEs [N, H / N, T] (= [H, T]), chunk s for rank s.
  HostScratch send_out(dtype, num_tokens * num_heads * head_size);
  HostScratch send_lse(DType::kF32, num_heads * num_tokens);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t h = 0; h < num_heads; ++h) {
      const int64_t slice = h / heads_per_rank;
      const int64_t base =
          ((slice * num_tokens + t) * heads_per_rank + h % heads_per_rank) * head_size;
      for (int64_t d = 0; d < head_size; ++d) {
        std::memcpy(send_out.bytes.data() + (base + d) * element,
                    partial_out.data_as<const char>() + offset3(partial_out, t, h, d) * element,
                    element);
      }
      send_lse.view.data_as<float>()[h * num_tokens + t] =
          partial_lse.data_as<const float>()[offset2(partial_lse, h, t)];
    }
  }
  HostScratch recv_out(dtype, num_tokens * num_heads * head_size);
  HostScratch recv_lse(DType::kF32, num_heads * num_tokens);
  PAGEDATTN_RETURN_IF_ERROR(comm.all_to_all(send_out.view, recv_out.view));
  PAGEDATTN_RETURN_IF_ERROR(comm.all_to_all(send_lse.view, recv_lse.view));

  std::vector<float> lses(world_size);
  std::vector<float> weights(world_size);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t hl = 0; hl < heads_per_rank; ++hl) {
      for (int s = 0; s < world_size; ++s) {
        lses[s] = recv_lse.view.data_as<const float>()[(s * heads_per_rank + hl) * num_tokens + t];
      }
      out_lse.data_as<float>()[offset2(out_lse, hl, t)] = lse_weights(lses, weights);
      for (int64_t d = 0; d < head_size; ++d) {
        float value = 0.0f;
        for (int s = 0; s < world_size; ++s) {
          if (weights[s] == 0.0f) continue;  // an empty rank adds nothing, not even its NaN
          value += weights[s] * load_as_float(recv_out.view.data(), dtype,
                                              ((s * num_tokens + t) * heads_per_rank + hl) *
                                                      head_size + d);
        }
        store_from_float(out.data(), dtype, (t * heads_per_rank + hl) * head_size + d, value);
      }
    }
  }
  return ok_status();
}

}  // namespace pagedattn::dcp
