#include "plan/page_indptr.h"

#include <algorithm>

namespace pagedattn::plan {

void paged_kv_indptr(std::span<const int32_t> seq_lens, int page_size, std::span<int32_t> indptr,
                     std::span<int32_t> last_page_len) {
  indptr[0] = 0;
  for (size_t r = 0; r < seq_lens.size(); ++r) {
    const int32_t seq = seq_lens[r];
    indptr[r + 1] = indptr[r] + (seq + page_size - 1) / page_size;
    const int32_t rem = seq % page_size;
    last_page_len[r] = rem == 0 && seq != 0 ? page_size : rem;
  }
}

void paged_kv_indices(std::span<const int32_t> block_table, int64_t stride,
                      std::span<const int32_t> indptr, std::span<int32_t> indices) {
  for (size_t r = 0; r + 1 < indptr.size(); ++r) {
    const int32_t* row = block_table.data() + static_cast<int64_t>(r) * stride;
    std::copy(row, row + (indptr[r + 1] - indptr[r]), indices.data() + indptr[r]);
  }
}

}  // namespace pagedattn::plan
