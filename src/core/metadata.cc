// CommonAttentionMetadata::validate (every field against the others and the cache geometry) and
// validate_common_prefix (the blocks a cascade shares).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "common/checked_math.h"
#include "pagedattn/metadata.h"

namespace pagedattn {
namespace {

int64_t read_int(const TensorView& t, int64_t i) {
  if (t.dtype() == DType::kI64) return t.data_as<const int64_t>()[i * t.stride(0)];
  return t.data_as<const int32_t>()[i * t.stride(0)];
}

bool host_readable(const TensorView& t) {
  return t.device().is_cpu() && t.data() != nullptr;
}

// A view with elements needs a pointer, wherever it lives (a null host view would be read, a null
// device view would be handed to a kernel).
Status check_has_data(const TensorView& t, std::string_view what) {
  if (t.data() == nullptr && t.numel() > 0) {
    return invalid_argument(std::string(what) + " has no data (null pointer) but " +
                            std::to_string(t.numel()) + " elements: " + t.describe());
  }
  return ok_status();
}

Status check_vector(const TensorView& t, std::string_view what, int64_t length, DType dtype) {
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(t, what, 1));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(t, what, {dtype}));
  if (length >= 0 && t.size(0) != length) {
    return invalid_argument(std::string(what) + " must have " + std::to_string(length) +
                            " entries, got " + t.describe());
  }
  return check_has_data(t, what);
}

Status check_host(const TensorView& t, std::string_view what) {
  if (!t.device().is_cpu()) {
    return invalid_argument(std::string(what) + " must be on the host (cpu), got " + t.describe());
  }
  return check_has_data(t, what);
}

// A device field whose host copy exists must hold the same values when it too is host-resident.
Status check_copy(const TensorView& t, std::string_view what, const TensorView& host,
                  std::string_view host_what) {
  if (!host_readable(t)) return ok_status();
  for (int64_t i = 0; i < host.size(0); ++i) {
    if (read_int(t, i) != read_int(host, i)) {
      return invalid_argument(std::string(what) + "[" + std::to_string(i) +
                              "] = " + std::to_string(read_int(t, i)) + " differs from " +
                              std::string(host_what) + "[" + std::to_string(i) +
                              "] = " + std::to_string(read_int(host, i)));
    }
  }
  return ok_status();
}

}  // namespace

Status CommonAttentionMetadata::validate(int block_size, int64_t num_blocks) const {
  if (block_size <= 0)
    return invalid_argument("block_size must be positive, got " + std::to_string(block_size));
  if (num_blocks <= 0)
    return invalid_argument("num_blocks must be positive, got " + std::to_string(num_blocks));
  if (num_reqs < 0)
    return invalid_argument("num_reqs must be >= 0, got " + std::to_string(num_reqs));
  if (num_actual_tokens < 0) {
    return invalid_argument("num_actual_tokens must be >= 0, got " +
                            std::to_string(num_actual_tokens));
  }
  if (max_query_len < 0) {
    return invalid_argument("max_query_len must be >= 0, got " + std::to_string(max_query_len));
  }
  if (max_seq_len < 0)
    return invalid_argument("max_seq_len must be >= 0, got " + std::to_string(max_seq_len));
  const DcpShard shard = dcp_shard();
  PAGEDATTN_RETURN_IF_ERROR(shard.validate(block_size));
  const bool sharded = shard.world_size > 1;
  // The keys of a sequence of `length` tokens that this rank's blocks hold.
  const auto stored = [&](int64_t length) { return dcp_local_length(length, shard); };
  const auto stored_text = [&](int64_t length) {
    return sharded ? " (" + std::to_string(stored(length)) + " of them on dcp_rank " +
                         std::to_string(shard.rank) + ")"
                   : std::string();
  };

  // Shapes and dtypes.
  const int64_t num_reqs_plus_1 = int64_t{num_reqs} + 1;
  PAGEDATTN_RETURN_IF_ERROR(
      check_vector(query_start_loc, "query_start_loc", num_reqs_plus_1, DType::kI32));
  PAGEDATTN_RETURN_IF_ERROR(
      check_vector(query_start_loc_cpu, "query_start_loc_cpu", num_reqs_plus_1, DType::kI32));
  PAGEDATTN_RETURN_IF_ERROR(check_host(query_start_loc_cpu, "query_start_loc_cpu"));
  PAGEDATTN_RETURN_IF_ERROR(check_vector(seq_lens, "seq_lens", num_reqs, DType::kI32));
  PAGEDATTN_RETURN_IF_ERROR(check_vector(seq_lens_cpu, "seq_lens_cpu", num_reqs, DType::kI32));
  PAGEDATTN_RETURN_IF_ERROR(check_host(seq_lens_cpu, "seq_lens_cpu"));
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(block_table_tensor, "block_table_tensor", 2));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(block_table_tensor, "block_table_tensor", {DType::kI32}));
  PAGEDATTN_RETURN_IF_ERROR(check_has_data(block_table_tensor, "block_table_tensor"));
  if (block_table_tensor.size(0) < num_reqs) {
    return invalid_argument("block_table_tensor has " + std::to_string(block_table_tensor.size(0)) +
                            " rows; num_reqs is " + std::to_string(num_reqs));
  }
  PAGEDATTN_RETURN_IF_ERROR(check_vector(slot_mapping, "slot_mapping", -1, DType::kI64));
  if (is_prefilling.defined()) {
    PAGEDATTN_RETURN_IF_ERROR(check_vector(is_prefilling, "is_prefilling", num_reqs, DType::kU8));
    PAGEDATTN_RETURN_IF_ERROR(check_host(is_prefilling, "is_prefilling"));
  }

  // query_start_loc: starts at 0, never decreases, ends at or below num_actual_tokens (the rest is
  // CUDA-graph padding).
  const TensorView& qsl = query_start_loc_cpu;
  if (read_int(qsl, 0) != 0) {
    return invalid_argument("query_start_loc_cpu[0] must be 0, got " +
                            std::to_string(read_int(qsl, 0)));
  }
  // It and seq_lens_cpu are int32 host vectors (checked above): the per-request loops, which
  // every build() of every backend runs, read them through their pointers.
  const int32_t* starts = qsl.data_as<const int32_t>();
  const int32_t* seqs = seq_lens_cpu.data_as<const int32_t>();
  const int64_t starts_stride = qsl.stride(0), seqs_stride = seq_lens_cpu.stride(0);
  for (int r = 0; r < num_reqs; ++r) {
    if (starts[(r + 1) * starts_stride] < starts[r * starts_stride]) {
      return invalid_argument("query_start_loc_cpu must be non-decreasing: entry " +
                              std::to_string(r + 1) + " = " + std::to_string(read_int(qsl, r + 1)) +
                              " is below entry " + std::to_string(r) + " = " +
                              std::to_string(read_int(qsl, r)));
    }
  }
  const int64_t num_real_tokens = read_int(qsl, num_reqs);
  if (num_real_tokens > num_actual_tokens) {
    return invalid_argument("query_start_loc_cpu[num_reqs] = " + std::to_string(num_real_tokens) +
                            " exceeds num_actual_tokens = " + std::to_string(num_actual_tokens));
  }
  if (slot_mapping.size(0) < num_real_tokens) {
    return invalid_argument("slot_mapping has " + std::to_string(slot_mapping.size(0)) +
                            " entries; the batch has " + std::to_string(num_real_tokens) +
                            " tokens");
  }
  PAGEDATTN_RETURN_IF_ERROR(
      check_copy(query_start_loc, "query_start_loc", qsl, "query_start_loc_cpu"));
  PAGEDATTN_RETURN_IF_ERROR(check_copy(seq_lens, "seq_lens", seq_lens_cpu, "seq_lens_cpu"));

  // Per-request lengths against the maxima and the block table width.
  const int64_t table_width = block_table_tensor.size(1);
  int64_t longest_query = 0;
  int64_t longest_seq = 0;
  // Each length against the keys the table holds (no division per request).
  const int64_t table_keys =
      checked_mul(table_width, int64_t{block_size}).value_or(std::numeric_limits<int64_t>::max());
  for (int r = 0; r < num_reqs; ++r) {
    const int64_t query_len =
        int64_t{starts[(r + 1) * starts_stride]} - int64_t{starts[r * starts_stride]};
    const int64_t seq_len = seqs[r * seqs_stride];
    if (seq_len < 0) {
      return invalid_argument("seq_lens_cpu[" + std::to_string(r) +
                              "] = " + std::to_string(seq_len) + " is negative");
    }
    if (query_len > seq_len) {
      return invalid_argument("request " + std::to_string(r) + ": query_len " +
                              std::to_string(query_len) +
                              " (from query_start_loc_cpu) exceeds seq_lens_cpu[" +
                              std::to_string(r) + "] = " + std::to_string(seq_len));
    }
    if (stored(seq_len) > table_keys) {  // needs more than table_width blocks
      const int64_t blocks_needed = (stored(seq_len) + block_size - 1) / block_size;
      return invalid_argument("block_table_tensor is too narrow: request " + std::to_string(r) +
                              " has seq_len " + std::to_string(seq_len) + stored_text(seq_len) +
                              " and needs " +
                              std::to_string(blocks_needed) + " blocks of " +
                              std::to_string(block_size) + ", the table has " +
                              std::to_string(table_width) + " columns");
    }
    longest_query = std::max(longest_query, query_len);
    longest_seq = std::max(longest_seq, seq_len);
  }
  if (max_query_len < longest_query) {
    return invalid_argument("max_query_len = " + std::to_string(max_query_len) +
                            " is smaller than the longest query (" + std::to_string(longest_query) +
                            ")");
  }
  if (max_seq_len < longest_seq) {
    return invalid_argument("max_seq_len = " + std::to_string(max_seq_len) +
                            " is smaller than the longest sequence (" +
                            std::to_string(longest_seq) + ")");
  }

  // Block ids in use must address the cache. A request may name one block at several positions
  // (vLLM's and FlashAttention's random test tables do): attention reads it at each.
  const bool table_on_host = host_readable(block_table_tensor);
  const auto block_id = [&](int64_t r, int64_t c) {
    return int64_t{block_table_tensor.data_as<const int32_t>()[r * block_table_tensor.stride(0) +
                                                               c * block_table_tensor.stride(1)]};
  };
  if (table_on_host) {
    for (int r = 0; r < num_reqs; ++r) {
      const int64_t blocks_needed =
          (stored(read_int(seq_lens_cpu, r)) + block_size - 1) / block_size;
      for (int64_t c = 0; c < blocks_needed; ++c) {
        const int64_t id = block_id(r, c);
        if (id < 0 || id >= num_blocks) {
          return invalid_argument("block_table_tensor[" + std::to_string(r) + "][" +
                                  std::to_string(c) + "] = " + std::to_string(id) +
                                  " is outside the cache's blocks [0, " +
                                  std::to_string(num_blocks) + ")");
        }
      }
    }
  }

  // Slots: each real token's slot is inside the cache (where the block table puts its position,
  // when the table is on the host too); CUDA-graph padding tokens (past the real ones, up to
  // num_actual_tokens) are -1, and entries past num_actual_tokens are -1 or inside the cache.
  // Under DCP a real token is -1 exactly where another rank stores it.
  if (host_readable(slot_mapping)) {
    const std::optional<int64_t> num_slots = checked_mul(num_blocks, block_size);
    if (!num_slots) {
      return invalid_argument("num_blocks = " + std::to_string(num_blocks) + " x block_size = " +
                              std::to_string(block_size) + " slots overflows int64");
    }
    for (int64_t t = 0; t < slot_mapping.size(0); ++t) {
      const int64_t slot = read_int(slot_mapping, t);
      const bool real = t < num_real_tokens;
      const bool padding = !real && t < num_actual_tokens;
      if (padding && slot != -1) {
        return invalid_argument("slot_mapping[" + std::to_string(t) +
                                "] = " + std::to_string(slot) + " is a padding token (past the " +
                                std::to_string(num_real_tokens) +
                                " tokens of query_start_loc_cpu): its slot must be -1");
      }
      if (((real && !sharded) || slot != -1) && (slot < 0 || slot >= *num_slots)) {
        return invalid_argument(
            "slot_mapping[" + std::to_string(t) + "] = " + std::to_string(slot) +
            " is outside the cache (allowed: [0, " + std::to_string(*num_slots) + ")" +
            (real && !sharded ? " for a real token" : " or -1") + ")");
      }
    }
    if (table_on_host) {
      std::vector<std::pair<int64_t, int64_t>> written;  // (block id, column) a request writes
      for (int r = 0; r < num_reqs; ++r) {
        const int64_t start = read_int(qsl, r);
        const int64_t query_len = read_int(qsl, r + 1) - start;
        const int64_t context_len = read_int(seq_lens_cpu, r) - query_len;
        written.clear();
        for (int64_t i = 0; i < query_len; ++i) {
          const int64_t slot = read_int(slot_mapping, start + i);
          const int64_t pos = context_len + i;
          const bool mine = dcp_owner_rank(pos, shard.world_size, shard.interleave) == shard.rank;
          const int64_t local = dcp_local_position(pos, shard.world_size, shard.interleave);
          const int64_t expected =
              mine ? block_id(r, local / block_size) * block_size + local % block_size : -1;
          if (slot != expected) {
            return invalid_argument(
                "slot_mapping[" + std::to_string(start + i) + "] = " + std::to_string(slot) +
                " does not match request " + std::to_string(r) + " position " +
                std::to_string(pos) +
                (mine ? " (block_table_tensor gives slot " + std::to_string(expected) + ")"
                      : " (stored by dcp rank " +
                            std::to_string(dcp_owner_rank(pos, shard.world_size,
                                                          shard.interleave)) +
                            ", so this rank's slot is -1)"));
          }
          const int64_t column = local / block_size;
          if (mine && (written.empty() || written.back().second != column)) {
            written.emplace_back(block_id(r, column), column);
          }
        }
        // A block named at two columns the step writes would take two tokens in one slot.
        std::sort(written.begin(), written.end());
        for (size_t k = 1; k < written.size(); ++k) {
          if (written[k].first == written[k - 1].first) {
            return invalid_argument(
                "block_table_tensor[" + std::to_string(r) + "][" +
                std::to_string(written[k].second) + "] = " + std::to_string(written[k].first) +
                " repeats column " + std::to_string(written[k - 1].second) +
                ": this step writes new tokens into both, two tokens to one slot");
          }
        }
      }
    }
  }
  return ok_status();
}

Status CommonAttentionMetadata::validate_common_prefix(int common_prefix_len,
                                                       int block_size) const {
  if (common_prefix_len == 0) return ok_status();
  const std::string what = "common_prefix_len = " + std::to_string(common_prefix_len);
  if (block_size <= 0)
    return invalid_argument("block_size must be positive, got " + std::to_string(block_size));
  if (common_prefix_len < 0 || common_prefix_len % block_size != 0) {
    return invalid_argument(
        what + ": must be a non-negative multiple of block_size = " + std::to_string(block_size));
  }
  if (num_reqs <= 0)
    return invalid_argument(what + " with no requests (num_reqs = " + std::to_string(num_reqs) +
                            ")");
  PAGEDATTN_RETURN_IF_ERROR(
      check_vector(query_start_loc_cpu, "query_start_loc_cpu", int64_t{num_reqs} + 1, DType::kI32));
  PAGEDATTN_RETURN_IF_ERROR(check_host(query_start_loc_cpu, "query_start_loc_cpu"));
  PAGEDATTN_RETURN_IF_ERROR(check_vector(seq_lens_cpu, "seq_lens_cpu", num_reqs, DType::kI32));
  PAGEDATTN_RETURN_IF_ERROR(check_host(seq_lens_cpu, "seq_lens_cpu"));
  for (int r = 0; r < num_reqs; ++r) {
    const int64_t query_len =
        read_int(query_start_loc_cpu, r + 1) - read_int(query_start_loc_cpu, r);
    const int64_t context_len = read_int(seq_lens_cpu, r) - query_len;
    if (common_prefix_len > context_len) {
      return invalid_argument(what + " exceeds request " + std::to_string(r) +
                              "'s context length " + std::to_string(context_len) +
                              " (the shared prefix must be cached context)");
    }
  }
  // The prefix pass reads request 0's blocks for everyone: every request must hold the same ones.
  if (!host_readable(block_table_tensor)) return ok_status();
  PAGEDATTN_RETURN_IF_ERROR(expect_rank(block_table_tensor, "block_table_tensor", 2));
  PAGEDATTN_RETURN_IF_ERROR(expect_dtype(block_table_tensor, "block_table_tensor", {DType::kI32}));
  const int64_t prefix_blocks = common_prefix_len / block_size;
  if (block_table_tensor.size(0) < num_reqs || block_table_tensor.size(1) < prefix_blocks) {
    return invalid_argument("block_table_tensor " + block_table_tensor.describe() +
                            " cannot hold " + std::to_string(prefix_blocks) +
                            " prefix blocks for " + std::to_string(num_reqs) + " requests");
  }
  const auto* table = block_table_tensor.data_as<const int32_t>();
  const int64_t row = block_table_tensor.stride(0), col = block_table_tensor.stride(1);
  for (int r = 1; r < num_reqs; ++r) {
    for (int64_t c = 0; c < prefix_blocks; ++c) {
      if (table[r * row + c * col] != table[c * col]) {
        return invalid_argument(
            what + " (" + std::to_string(prefix_blocks) + " blocks): block_table_tensor[" +
            std::to_string(r) + "][" + std::to_string(c) +
            "] = " + std::to_string(table[r * row + c * col]) + " differs from request 0's block " +
            std::to_string(table[c * col]) +
            " (a shared prefix must be the same blocks in every request)");
      }
    }
  }
  return ok_status();
}

}  // namespace pagedattn
