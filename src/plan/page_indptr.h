// vLLM's FlashInfer page metadata (flashinfer.py, _compute_flashinfer_kv_metadata): per request the
// number of KV pages as a CSR indptr, the flattened page ids, and the tokens in each last page.
// Host functions over host copies; the FLASHINFER kernels read the block table directly, so these
// arrays describe the step (and are what FlashInfer's own wrappers would be given).
#pragma once

#include <cstdint>
#include <span>

namespace pagedattn::plan {

// indptr [n + 1]: indptr[0] = 0, indptr[r + 1] = indptr[r] + ceil(seq_lens[r] / page_size).
// last_page_len [n]: seq_len % page_size, or page_size when that is 0 and seq_len > 0 (0 stays 0).
void paged_kv_indptr(std::span<const int32_t> seq_lens, int page_size, std::span<int32_t> indptr,
                     std::span<int32_t> last_page_len);

// indices [indptr[n]]: the first pages of each block-table row (block_table [n, stride], host),
// as vLLM's _copy_page_indices_kernel writes them.
void paged_kv_indices(std::span<const int32_t> block_table, int64_t stride,
                      std::span<const int32_t> indptr, std::span<int32_t> indices);

}  // namespace pagedattn::plan
