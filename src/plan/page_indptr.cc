#include "plan/page_indptr.h"

#include <algorithm>
#include <bit>

namespace pagedattn::plan {

namespace {

// One request's pages and last-page length; `pages_of` divides by the page size.
template <typename PagesOf>
void fill_indptr(std::span<const int32_t> seq_lens, int page_size, PagesOf pages_of,
                 std::span<int32_t> indptr, std::span<int32_t> last_page_len) {
  int32_t total = 0;
  indptr[0] = 0;
  for (size_t r = 0; r < seq_lens.size(); ++r) {
    const int32_t seq = seq_lens[r];
    const int32_t pages = pages_of(seq);
    total += pages;
    indptr[r + 1] = total;
    // seq % page_size, or page_size when that is 0 (0 stays 0).
    last_page_len[r] = seq == 0 ? 0 : seq - (pages - 1) * page_size;
  }
}

}  // namespace

void paged_kv_indptr(std::span<const int32_t> seq_lens, int page_size, std::span<int32_t> indptr,
                     std::span<int32_t> last_page_len) {
  // Page sizes are powers of two in practice: a shift instead of a division per request.
  if (page_size > 0 && (page_size & (page_size - 1)) == 0) {
    const int shift = std::countr_zero(static_cast<unsigned>(page_size));
    fill_indptr(
        seq_lens, page_size, [&](int32_t seq) { return (seq + page_size - 1) >> shift; }, indptr,
        last_page_len);
  } else {
    fill_indptr(
        seq_lens, page_size, [&](int32_t seq) { return (seq + page_size - 1) / page_size; }, indptr,
        last_page_len);
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
