// libFuzzer target: CommonAttentionMetadata::validate() and CPU_ATTN's builder, cache update and
// forward over a case's batch that the input's edit bytes corrupt (block ids, slots, lengths, the
// scalars, null views, the shared prefix). Whatever validate() and build() accept must run without
// a memory error; what they refuse must come with a message.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fuzz_input.h"
#include "pagedattn/backend.h"
#include "testing/batch_params.h"
#include "testing/host_batch.h"

namespace pagedattn::fuzz {
namespace {

// A value near [0, n) most of the time (where the interesting boundaries are), any int32 otherwise.
int64_t pick(EditReader& r, int64_t n, bool raw) {
  const int32_t v = r.i32();
  if (raw || n + 3 <= 0) return v;
  return static_cast<int64_t>(static_cast<uint32_t>(v) % static_cast<uint64_t>(n + 3)) - 1;
}

struct Edits {
  int common_prefix_len = 0;
  int64_t num_blocks = 0;  // what validate() is told
};

Edits apply_edits(EditReader& r, testing::HostBatch& b, CommonAttentionMetadata& meta) {
  Edits e{b.spec.common_prefix_len, b.num_blocks};
  const int64_t bs = b.spec.block_size;
  const int64_t tokens = b.spec.num_tokens();
  const int num_reqs = b.spec.num_reqs();  // the buffers' sizes (meta.num_reqs may be edited)
  while (!r.done()) {
    const int op = static_cast<int>(r.bits(1));
    const bool raw = op & 1;
    const uint64_t index = r.bits(2);
    switch ((op >> 1) % 11) {
      case 0: {
        const int64_t n = b.block_table.view().numel();
        b.block_table.data<int32_t>()[index % n] = static_cast<int32_t>(pick(r, b.num_blocks, raw));
        break;
      }
      case 1: {
        const int64_t n = b.slot_mapping.view().numel();
        b.slot_mapping.data<int64_t>()[index % n] = pick(r, b.num_blocks * bs, raw);
        break;
      }
      case 2:
        b.seq_lens.data<int32_t>()[index % num_reqs] =
            static_cast<int32_t>(pick(r, meta.max_seq_len + bs, raw));
        break;
      case 3:
        b.query_start_loc.data<int32_t>()[index % (num_reqs + 1)] =
            static_cast<int32_t>(pick(r, tokens, raw));
        break;
      case 4: meta.num_actual_tokens = static_cast<int>(pick(r, tokens + 2, raw)); break;
      case 5: meta.max_query_len = static_cast<int>(pick(r, tokens, raw)); break;
      case 6: meta.max_seq_len = static_cast<int>(pick(r, meta.max_seq_len + bs, raw)); break;
      case 7: meta.num_reqs = static_cast<int>(pick(r, meta.num_reqs, raw)); break;
      case 8: e.common_prefix_len = static_cast<int>(pick(r, 4, raw) * (raw ? 1 : bs)); break;
      case 9: e.num_blocks = pick(r, b.num_blocks, raw); break;
      default: {
        TensorView* views[] = {&meta.query_start_loc_cpu, &meta.seq_lens_cpu,
                               &meta.block_table_tensor,  &meta.slot_mapping,
                               &meta.query_start_loc,     &meta.seq_lens};
        TensorView& v = *views[index % 6];
        const std::vector<int64_t> shape(v.shape().begin(), v.shape().end());
        v = TensorView(nullptr, v.dtype(), v.device(), std::span<const int64_t>(shape));
        r.bits(4);
        break;
      }
    }
  }
  return e;
}

}  // namespace
}  // namespace pagedattn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagedattn;
  using namespace pagedattn::fuzz;
  const CaseInput in = split_case_input(data, size);
  std::optional<testing::CaseSpec> spec = small_case(in.json);
  if (!spec) return 0;
  const AttentionBackend* backend = find_backend("CPU_ATTN");
  const KVCacheLayout layout = spec->kv_layout.value_or(KVCacheLayout::kNHD);
  StatusOr<testing::HostBatch> batch = testing::make_host_batch(*spec, layout);
  if (!batch.ok()) return 0;
  testing::HostBatch& b = *batch;
  CommonAttentionMetadata meta = b.metadata();
  EditReader reader(in.edits, in.num_edits_bytes);
  const Edits e = apply_edits(reader, b, meta);

  const Status valid = meta.validate(spec->block_size, e.num_blocks);
  if (!valid.ok()) {
    check_message(valid);
    return 0;
  }
  const Status prefix = meta.validate_common_prefix(e.common_prefix_len, spec->block_size);
  check_message(prefix);
  if (e.num_blocks > b.num_blocks) return 0;  // told a larger cache than there is: not our promise

  StatusOr<std::unique_ptr<AttentionMetadataBuilder>> builder =
      backend->make_builder(testing::builder_params_for(*spec, Device::cpu()));
  if (!builder.ok()) return 0;
  StatusOr<std::unique_ptr<AttentionMetadata>> md =
      (*builder)->build(prefix.ok() ? e.common_prefix_len : 0, meta);
  if (!md.ok()) return 0;
  StatusOr<std::unique_ptr<AttentionImpl>> impl = backend->make_impl(b.params);
  if (!impl.ok()) return 0;
  const Status update = (*impl)->do_kv_cache_update(b.key.view(), b.value.view(), b.kv_cache.view(),
                                                    meta.slot_mapping, b.scales());
  if (!update.ok()) return 0;
  const int64_t tokens = spec->num_tokens();
  testing::HostTensor output(spec->dtype, {tokens, spec->num_heads, spec->head_size});
  testing::HostTensor lse(DType::kF32, {spec->num_heads, tokens});
  const Status forward =
      (*impl)->forward(b.query.view(), b.key.view(), b.value.view(), b.kv_cache.view(), **md,
                       output.view(), lse.view(), b.scales());
  check_message(forward);
  return 0;
}
