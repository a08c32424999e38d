// Timing of GQA packing in the v3 prefill kernel (PagedAttentionParams::pack_gqa) beside v2 on
// decode-shaped launches (the unpacked v3 kernel refuses them): the standard suite's decode shapes
// (one query token per request, bf16, head size 128) and two speculative-decode ones (4 and 8
// query tokens), at blocks 16 and 128; v2 through the dispatch, v3 packed, and v3 unpacked where
// it serves the shape (q_len x group > 16). Launches interleaved one by one (interleaved_ms),
// medians; prints the K/V bytes read per second (each request's keys once per KV head) and the
// largest difference between v2's and v3's outputs on the same inputs. GqaPrefill: packed against
// the dispatch's unpacked v3 on prefill shapes (packing stores O from the accumulators, not
// staged; causal tiles span fewer positions). GqaMixed: the standard suite's mixed pass in one
// launch through v2, packed and unpacked v3. Run: pagedattn_gpu_bench --gtest_filter='V3Bench.Gqa*'.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "v3_bench_support.h"

namespace pagedattn::test {
namespace {

// K and V of every request's keys, once per KV head (bf16).
double kv_bytes(const PrefillBench& b) {
  return 2.0 * 2.0 * b.num_reqs * double(b.len) * b.kv_heads * b.d;
}

void time_decode_shape(const Shape& shape, int block) {
  const PrefillBench b(block, shape, false);
  const bool unpacked_serves = int64_t{b.q_len} * (b.heads / b.kv_heads) > 16;
  std::vector<Schedule> rows = {{"v2 dispatch", kernels::launch_paged_attention},
                                {"v3 packed", launch_v3_packed}};
  if (unpacked_serves) rows.push_back({"v3 unpacked", launch_v3});
  for (bool causal : {true, false}) {
    const std::vector<double> ms = interleaved_ms(rows, b.params(causal));
    for (size_t i = 0; i < rows.size(); ++i) {
      std::printf("BENCH %-22s block %3d %-12s %-10s %8.4f ms %7.0f GB/s\n", shape.name, block,
                  rows[i].name, causal ? "causal" : "noncausal", ms[i], kv_bytes(b) / ms[i] / 1e6);
    }
    const double worst = max_difference(output_of(kernels::launch_paged_attention, b, causal),
                                        output_of(launch_v3_packed, b, causal));
    std::printf("BENCH %-22s block %3d v3 packed vs v2 output, %s: max |difference| %.3g\n",
                shape.name, block, causal ? "causal" : "noncausal", worst);
    EXPECT_LT(worst, 0.02) << shape.name << " block " << block;
  }
}

// The standard suite's decode shapes (tools/pagedattn/bench_suites.cc kStandardDecode), then
// speculative decoding's few query tokens.
const Shape kDecodeShapes[] = {
    {"64x4096 q1 32/8", 64, 4096, 32, 8, 128, 1},   {"256x2048 q1 32/8", 256, 2048, 32, 8, 128, 1},
    {"8x32768 q1 32/8", 8, 32768, 32, 8, 128, 1},   {"128x1024 q1 64/8", 128, 1024, 64, 8, 128, 1},
    {"32x8192 q1 32/32", 32, 8192, 32, 32, 128, 1}, {"64x4096 q4 32/8", 64, 4096, 32, 8, 128, 4},
    {"64x4096 q8 32/8", 64, 4096, 32, 8, 128, 8},
};

TEST(V3Bench, GqaDecode) {
  PAGEDATTN_REQUIRE_V3();
  if (!kernels::paged_attention_head_size_built(128)) GTEST_SKIP() << "head size 128 not built";
  for (const Shape& shape : kDecodeShapes) {
    for (int block : {16, 128}) time_decode_shape(shape, block);
  }
}

// Packing on the prefill shapes of the standard suite at D 128 (block 128), TFLOP/s.
TEST(V3Bench, GqaPrefill) {
  PAGEDATTN_REQUIRE_V3();
  if (!kernels::paged_attention_head_size_built(128)) GTEST_SKIP() << "head size 128 not built";
  const std::vector<Schedule> rows = {{"v3 dispatch", launch_v3}, {"v3 packed", launch_v3_packed}};
  for (const Shape& shape :
       {Shape{"16x512 d128", 16, 512, 32, 8, 128}, Shape{"4x2048 d128", 4, 2048, 32, 8, 128},
        Shape{"1x8192 d128", 1, 8192, 32, 8, 128}}) {
    const PrefillBench b(128, shape, false);
    for (bool causal : {false, true}) {
      const std::vector<double> ms = interleaved_ms(rows, b.params(causal));
      for (size_t i = 0; i < rows.size(); ++i) {
        report(shape.name, rows[i].name, causal, ms[i], b.flops(causal));
      }
      const double worst =
          max_difference(output_of(launch_v3, b, causal), output_of(launch_v3_packed, b, causal));
      std::printf("BENCH %-16s v3 packed vs unpacked output, %s: max |difference| %.3g\n",
                  shape.name, causal ? "causal" : "noncausal", worst);
      EXPECT_LT(worst, 0.02) << shape.name;
    }
  }
}

// The standard suite's mixed pass (64 decodes over 4096 keys and one 2048-token chunk over 2048 of
// context, 32/8 heads, D 128) in one launch: v2, v3 packed (the decodes read their K/V once per KV
// head, the chunk as a prefill: what gpu::pass_kernel picks for it) and v3 unpacked (its decodes
// read K/V once per query head), ms.
TEST(V3Bench, GqaMixed) {
  PAGEDATTN_REQUIRE_V3();
  if (!kernels::paged_attention_head_size_built(128)) GTEST_SKIP() << "head size 128 not built";
  constexpr int kDecodes = 64, kChunk = 2048;
  std::vector<int32_t> starts(kDecodes + 2);
  for (int r = 0; r <= kDecodes; ++r) starts[r] = r;
  starts[kDecodes + 1] = kDecodes + kChunk;
  const DeviceArray<int32_t> cu{starts};
  const std::vector<Schedule> rows = {{"v2 dispatch", kernels::launch_paged_attention},
                                      {"v3 packed", launch_v3_packed},
                                      {"v3 unpacked", launch_v3}};
  for (int block : {16, 128}) {
    // Buffers for 65 requests of 4096 keys, the last kChunk of each a query; the pass uses the
    // first kDecodes + kChunk query rows.
    const PrefillBench b(block, Shape{"mixed", kDecodes + 1, 4096, 32, 8, 128, kChunk}, false);
    kernels::PagedAttentionParams p = b.params(true);
    p.cu_seqlens_q = cu.get();
    p.num_tokens = kDecodes + kChunk;
    p.lse_head_stride = p.num_tokens;
    const std::vector<double> ms = interleaved_ms(rows, p);
    for (size_t i = 0; i < rows.size(); ++i) {
      std::printf("BENCH mixed 64x4096+chunk2048@2048 block %3d %-12s %8.4f ms\n", block,
                  rows[i].name, ms[i]);
    }
    const std::vector<uint16_t> v2 = output_of(kernels::launch_paged_attention, b, p);
    for (const Schedule& v3 : {rows[1], rows[2]}) {
      std::vector<uint16_t> out = output_of(v3.launch, b, p);
      const double worst = max_difference(
          std::vector<uint16_t>(v2.begin(), v2.begin() + size_t(p.num_tokens) * b.heads * b.d),
          std::vector<uint16_t>(out.begin(), out.begin() + size_t(p.num_tokens) * b.heads * b.d));
      std::printf("BENCH mixed block %3d %s vs v2 output: max |difference| %.3g\n", block, v3.name,
                  worst);
      EXPECT_LT(worst, 0.02) << v3.name << " block " << block;
    }
  }
}

}  // namespace
}  // namespace pagedattn::test
