// K and V planes far apart in memory (vLLM keeps K and V as two tensors, so the cache's kv stride
// is the distance between two allocations): every distance the launch accepts gives the oracle's
// output, through the paged attention kernel (unsplit and split) and the decode kernel. The device
// cache puts 2^31 NaN elements before K, so an element offset that wraps in 32 bits when scaled to
// bytes reads NaN inside the allocation (a wrong output) instead of faulting the process.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "paged_attention_harness.h"
#include "test_flashinfer_decode_harness.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

// The conformance report's shape (D 256; D 128 too, for builds without 256): 16/2 heads, f16,
// blocks of 16; a batch with odd lengths, in 2048 blocks.
constexpr int kHeadSizes[] = {256, 128};

CaseSpec far_apart_case(int head_size, const std::vector<int>& query_lens,
                        const std::vector<int>& seq_lens) {
  CaseSpec c;
  c.name = "kv_far_apart_d" + std::to_string(head_size);
  c.seed = 2026;
  c.dtype = DType::kF16;
  c.num_heads = 16;
  c.num_kv_heads = 2;
  c.head_size = head_size;
  c.block_size = 16;
  c.query_lens = query_lens;
  c.seq_lens = seq_lens;
  c.num_blocks = 2048;
  return c;
}

// V's offset from K in elements, each a multiple of 16: below 2^30 (its byte offset fits 32
// bits), just past 2^30, the conformance report's 2^31 - 16,785,408, past 2^31 and 2^32, and V
// before K (just before its blocks, and past -2^31).
std::vector<int64_t> distances(const CaseSpec& c) {
  const int64_t span = *c.num_blocks * 2 * c.block_size * c.num_kv_heads * c.head_size;
  return {int64_t{1} << 29,          (int64_t{1} << 30) + 4096, (int64_t{1} << 31) - 16785408,
          (int64_t{1} << 31) + 4096, (int64_t{1} << 32) + 16,   -span,
          -(int64_t{1} << 31) - 4096};
}

std::string describe(const CaseSpec& c, const reference::Comparison& cmp, int64_t distance) {
  return c.name + ", V at K + " + std::to_string(distance) + ": max_abs " +
         std::to_string(cmp.max_abs_error) + " lse " + std::to_string(cmp.max_lse_error) + "\n" +
         cmp.detail;
}

TEST(KvPlanesFarApart, PagedAttentionKernel) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  int ran = 0;
  for (int d : kHeadSizes) {
    if (!kernels::paged_attention_head_size_built(d)) continue;
    ++ran;
    const CaseSpec c = far_apart_case(d, {1, 7, 130, 1, 64}, {1, 300, 130, 1999, 700});
    for (int64_t distance : distances(c)) {
      for (int splits : {1, 4}) {
        SplitOptions s;
        s.max_num_splits = splits;
        const RunResult r = run_paged_case(c, KVCacheLayout::kNHD, s,
                                           kernels::launch_paged_attention, {}, {distance});
        EXPECT_TRUE(r.cmp.pass) << "splits " << splits << ", " << describe(c, r.cmp, distance);
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "head sizes 128 and 256 are not built";
}

TEST(KvPlanesFarApart, DecodeKernel) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  int ran = 0;
  for (int d : kHeadSizes) {
    if (kernels::decode_attention_kernel_head_size(d) != d) continue;
    ++ran;
    const CaseSpec c = far_apart_case(d, {1, 1, 1, 4}, {1, 300, 1999, 700});
    for (int64_t distance : distances(c)) {
      DecodeRunOptions o;
      o.placement.v_offset = distance;
      const DecodeRunResult r = run_decode_case(c, KVCacheLayout::kNHD, o);
      EXPECT_TRUE(r.cmp.pass) << describe(c, r.cmp, distance);
    }
  }
  if (ran == 0) GTEST_SKIP() << "head sizes 128 and 256 are not built";
}

}  // namespace
}  // namespace pagedattn::test
