// Executor::check and output_digest: the oracle reads a compact host copy of just the blocks the
// sampled requests own (a GPU cache can be many GiB), with the block table renumbered to match.
#include <cstdio>
#include <cstring>

#include "pagedattn/kv_cache.h"
#include "reference/attention_ref.h"
#include "reference/compare.h"
#include "serve/executor.h"

namespace pagedattn::serve {

StatusOr<uint64_t> Executor::output_digest(const StepBatch& batch) {
  const size_t bytes = static_cast<size_t>(batch.num_tokens) * model_.num_heads * model_.head_size *
                       dtype_size(model_.dtype);
  std::vector<unsigned char> host(bytes);
  uint64_t h = 0xCBF29CE484222325ull;
  for (void* out : buf_.outputs) {
    PAGEDATTN_RETURN_IF_ERROR(ops_->download(host.data(), out, bytes));
    for (unsigned char c : host) h = (h ^ c) * 0x100000001B3ull;
  }
  return h;
}

StatusOr<std::vector<std::string>> Executor::check(const StepBatch& b, int layer,
                                                   std::span<const int> positions, int max_rows) {
  std::vector<std::string> failures;
  const int hq = model_.num_heads, d = model_.head_size, bs = model_.block_size;
  const size_t esize = dtype_size(model_.dtype);
  const size_t row_bytes = static_cast<size_t>(hq) * d * esize;
  const TensorView& cache = caches_[layer].view();
  const size_t block_bytes = static_cast<size_t>(cache.stride(0)) * dtype_size(storage_);
  for (int i : positions) {
    const int seq_len = b.seq_lens[i];
    const int rows_checked = std::min(b.query_lens[i], max_rows);
    const int first_row = b.query_start_loc[i + 1] - rows_checked;
    const int num_blocks = (seq_len + bs - 1) / bs;

    // The query rows are the pool window this step uploaded; the output comes back from the device.
    std::vector<uint16_t> query(static_cast<size_t>(rows_checked) * hq * d);
    std::memcpy(query.data(), pool_.data() + q_offset_ + static_cast<int64_t>(first_row) * hq * d,
                query.size() * esize);
    std::vector<uint16_t> output(query.size());
    PAGEDATTN_RETURN_IF_ERROR(ops_->download(
        output.data(), static_cast<char*>(buf_.outputs[layer]) + first_row * row_bytes,
        rows_checked * row_bytes));

    KVCacheShape shape = {num_blocks, 2, bs, model_.num_kv_heads, d};
    PAGEDATTN_ASSIGN_OR_RETURN(
        KVCacheAllocation compact,
        KVCacheAllocation::allocate(shape, storage_, caches_[layer].layout(), Device::cpu()));
    std::vector<int32_t> table(num_blocks);
    for (int j = 0; j < num_blocks; ++j) {
      const int block = b.block_table[static_cast<size_t>(i) * b.table_width + j];
      PAGEDATTN_RETURN_IF_ERROR(ops_->download(
          static_cast<char*>(compact.view().data()) + j * block_bytes,
          static_cast<const char*>(cache.data()) + block * block_bytes, block_bytes));
      table[j] = j;
    }
    int32_t seq = seq_len, qsl[2] = {0, rows_checked};
    float one = 1.0f;
    const TensorView scale(&one, DType::kF32, Device::cpu(), {1});
    reference::ReferenceInputs in;
    in.query = TensorView(query.data(), model_.dtype, Device::cpu(), {rows_checked, hq, d});
    in.kv_cache = compact.view();
    in.block_table = TensorView(table.data(), DType::kI32, Device::cpu(), {1, num_blocks});
    in.seq_lens = TensorView(&seq, DType::kI32, Device::cpu(), {1});
    in.query_start_loc = TensorView(qsl, DType::kI32, Device::cpu(), {2});
    in.scales = {scale, scale};
    in.causal = true;
    PAGEDATTN_ASSIGN_OR_RETURN(const reference::ReferenceOutputs ref,
                               reference::reference_attention(in, impls_[layer]->params()));
    const TensorView out(output.data(), model_.dtype, Device::cpu(), {rows_checked, hq, d});
    const reference::Comparison c = reference::compare_to_reference(
        out, TensorView(), ref.out, ref.lse, reference::tolerance_for(model_.dtype));
    if (!c.pass) {
      char text[200];
      std::snprintf(text, sizeof(text),
                    "request %d (layer %d, last %d query rows of %d keys): max abs error %.3g, "
                    "relative Frobenius error %.3g\n",
                    b.request_ids[i], layer, rows_checked, seq_len, c.max_abs_error,
                    c.rel_frobenius);
      failures.push_back(text + c.detail);
    }
  }
  return failures;
}

}  // namespace pagedattn::serve
