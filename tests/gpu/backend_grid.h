// The GPU test grid every GPU backend runs against the float64 oracle: head sizes, GQA groups,
// pages 16 to 1024 in both layouts, f16/bf16 with auto/FP8 caches and per-tensor/per-head scales,
// each feature and combinations, all over one mixed batch. One list for every backend:
// PAGEDATTN_GPU_BACKEND_GRID(Prefix, expect) instantiates it with the backend's own check
// (`expect(spec, layout)`: run one step, compare with the oracle), as suites Grid/<Prefix>HeadSize,
// <Prefix>Gqa, <Prefix>Blocks, <Prefix>Dtypes and <Prefix>Features.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "kernels/attention/paged_attention.h"
#include "testing/case_spec.h"

namespace pagedattn::test::grid {

using testing::CaseSpec;

// In batch order: a decode, speculative verification (4), a decode over a 1-token sequence, a
// decode long enough for split-KV plans to cut, a whole prefill, a decode, a chunked prefill and a
// padding request (query_len 0). A decode-first backend reorders them.
inline CaseSpec mixed(std::string name, uint64_t seed = 1) {
  CaseSpec s;
  s.name = std::move(name);
  s.seed = seed;
  s.seq_lens = {37, 300, 1, 5000, 64, 1100, 250, 40};
  s.query_lens = {1, 4, 1, 1, 64, 1, 50, 0};
  return s;
}

inline CaseSpec small_heads(CaseSpec s) {
  s.num_heads = 8;
  s.num_kv_heads = 2;
  return s;
}

using Expect = void (*)(const CaseSpec&, KVCacheLayout);

// The instantiated sizes, and sizes served by the next larger kernel; an FP8 e5m2 HND run beside.
inline void head_size(int d, Expect expect) {
  if (kernels::paged_attention_kernel_head_size(d) == 0) {
    GTEST_SKIP() << "head size " << d << " has no kernel in this build";
  }
  CaseSpec s = mixed("head_size_" + std::to_string(d), 10 + d);
  s.head_size = d;
  expect(s, KVCacheLayout::kNHD);
  s.kv_cache_dtype = KVCacheDType::kFP8E5M2;
  s.name += "_fp8";
  expect(small_heads(s), KVCacheLayout::kHND);
}
inline const std::vector<int> kHeadSizes = {32,  40,  64,  72,  80,  96, 112,
                                            128, 160, 192, 200, 256, 512};

struct Heads {
  int hq, hkv;
};
inline void gqa(Heads h, Expect expect) {
  CaseSpec s = mixed("gqa_" + std::to_string(h.hq) + "_" + std::to_string(h.hkv), 3);
  s.num_heads = h.hq;
  s.num_kv_heads = h.hkv;
  expect(s, KVCacheLayout::kNHD);
  s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  s.kv_scale_per_head = true;
  s.name += "_fp8_head";
  expect(s, KVCacheLayout::kHND);
}
// Groups 1, 4, 7, 8, 16 and 64 (four 16-row tiles per decode).
inline const std::vector<Heads> kHeads = {{8, 8}, {32, 8}, {28, 4}, {64, 8}, {32, 2}, {64, 1}};

struct BlockLayout {
  int block_size;
  KVCacheLayout layout;
};
inline void blocks(BlockLayout p, Expect expect) {
  CaseSpec s = small_heads(mixed("block_" + std::to_string(p.block_size), 20 + p.block_size));
  s.block_size = p.block_size;
  expect(s, p.layout);
  s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  s.name += "_fp8";
  expect(s, p.layout);
}
inline const std::vector<BlockLayout> kBlocks = {
    {16, KVCacheLayout::kNHD},  {16, KVCacheLayout::kHND},   {32, KVCacheLayout::kHND},
    {64, KVCacheLayout::kNHD},  {128, KVCacheLayout::kHND},  {256, KVCacheLayout::kNHD},
    {512, KVCacheLayout::kHND}, {1024, KVCacheLayout::kNHD}, {1024, KVCacheLayout::kHND}};

struct Dtypes {
  DType dtype;
  KVCacheDType kv;
  bool per_head;
};
inline void dtypes(Dtypes p, Expect expect) {
  CaseSpec s = small_heads(mixed(std::string(dtype_name(p.dtype)) + "_" +
                                     std::string(kv_cache_dtype_name(p.kv)) +
                                     (p.per_head ? "_head" : ""),
                                 5));
  s.dtype = p.dtype;
  s.kv_cache_dtype = p.kv;
  s.kv_scale_per_head = p.per_head;
  expect(s, KVCacheLayout::kNHD);
  expect(s, KVCacheLayout::kHND);
}
inline const std::vector<Dtypes> kDtypes = {
    {DType::kF16, KVCacheDType::kAuto, false},     {DType::kBF16, KVCacheDType::kAuto, false},
    {DType::kF16, KVCacheDType::kFP8E4M3, false},  {DType::kF16, KVCacheDType::kFP8E4M3, true},
    {DType::kF16, KVCacheDType::kFP8E5M2, true},   {DType::kF16, KVCacheDType::kFP8E5M2, false},
    {DType::kBF16, KVCacheDType::kFP8E4M3, true},  {DType::kBF16, KVCacheDType::kFP8E4M3, false},
    {DType::kBF16, KVCacheDType::kFP8E5M2, false}, {DType::kBF16, KVCacheDType::kFP8E5M2, true}};

// One feature at a time, then combinations.
struct Feature {
  std::string name;
  bool causal = true;
  std::optional<SlidingWindow> window = std::nullopt;
  double softcap = 0.0;
  bool alibi = false;
  bool sinks = false;
  KVCacheDType kv = KVCacheDType::kAuto;
  DType dtype = DType::kBF16;
};
inline void feature(const Feature& f, Expect expect) {
  CaseSpec s = mixed(f.name, 7);
  s.causal = f.causal;
  s.sliding_window = f.window;
  s.logits_soft_cap = f.softcap;
  s.alibi = f.alibi;
  s.sinks = f.sinks;
  s.kv_cache_dtype = f.kv;
  s.dtype = f.dtype;
  expect(s, KVCacheLayout::kNHD);
  expect(small_heads(s), KVCacheLayout::kHND);
}
inline const std::vector<Feature> kFeatures = {
    {.name = "non_causal", .causal = false},
    {.name = "decoder_window", .window = SlidingWindow{63, 0}},
    {.name = "long_window", .window = SlidingWindow{2000, 0}},
    {.name = "encoder_window", .causal = false, .window = SlidingWindow{31, 31}},
    {.name = "left_window_only", .causal = false, .window = SlidingWindow{100, -1}},
    {.name = "softcap", .softcap = 30.0},
    {.name = "alibi", .alibi = true},
    {.name = "sinks", .sinks = true},
    {.name = "alibi_window_softcap", .window = SlidingWindow{127, 0}, .softcap = 20.0,
     .alibi = true},
    {.name = "sinks_window_fp8", .window = SlidingWindow{63, 0}, .sinks = true,
     .kv = KVCacheDType::kFP8E4M3},
    {.name = "sinks_softcap_f16_noncausal", .causal = false, .softcap = 15.0, .sinks = true,
     .dtype = DType::kF16},
    {.name = "sinks_softcap_f16_e5m2", .softcap = 15.0, .sinks = true,
     .kv = KVCacheDType::kFP8E5M2, .dtype = DType::kF16},
    {.name = "alibi_noncausal_fp8_e5m2", .causal = false, .alibi = true,
     .kv = KVCacheDType::kFP8E5M2}};

// Cascade: the shared case file's batch, 8 requests over a 256-token shared prefix.
inline CaseSpec shared_prefix(std::string name) {
  CaseSpec s;
  s.name = std::move(name);
  s.seed = 11;
  s.seq_lens = {871, 280, 988, 2304, 257, 300, 512, 1000};
  s.query_lens = {129, 18, 37, 1, 1, 1, 1, 7};
  s.common_prefix_len = 256;
  return s;
}

// All decodes over a long shared prefix: the passes split (prefix: one request of 16 tokens over
// 4096 keys; suffix: 16 short decodes).
inline CaseSpec decodes_over_long_prefix() {
  CaseSpec s;
  s.name = "cascade_decode";
  s.num_heads = 16;
  s.num_kv_heads = 2;
  s.block_size = 32;
  s.common_prefix_len = 4096;
  for (int r = 0; r < 16; ++r) {
    s.seq_lens.push_back(4097 + 61 * r);
    s.query_lens.push_back(1);
  }
  return s;
}

inline CaseSpec with_sinks(CaseSpec s) {
  s.name += "_sinks";
  s.sinks = true;
  return s;
}

inline CaseSpec fp8_softcap_f16(CaseSpec s) {
  s.name += "_fp8_softcap_f16";
  s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  s.kv_scale_per_head = true;
  s.logits_soft_cap = 30.0;
  s.dtype = DType::kF16;
  return s;
}

// Test names that read (ctest -N): the grid value, not its bytes.
inline std::string param_name(int head_size) { return "d" + std::to_string(head_size); }
inline std::string param_name(const Heads& h) {
  return "heads_" + std::to_string(h.hq) + "_" + std::to_string(h.hkv);
}
inline std::string param_name(const BlockLayout& b) {
  return "block_" + std::to_string(b.block_size) + "_" +
         std::string(kv_cache_layout_name(b.layout));
}
inline std::string param_name(const Dtypes& d) {
  return std::string(dtype_name(d.dtype)) + "_" + std::string(kv_cache_dtype_name(d.kv)) +
         (d.per_head ? "_per_head" : "");
}
// gtest prints a parameter beside the test's name (ctest -N): the same words, not its bytes.
inline void PrintTo(const Heads& h, std::ostream* os) { *os << param_name(h); }
inline void PrintTo(const BlockLayout& b, std::ostream* os) { *os << param_name(b); }
inline void PrintTo(const Dtypes& d, std::ostream* os) { *os << param_name(d); }
inline void PrintTo(const Feature& f, std::ostream* os) { *os << f.name; }

}  // namespace pagedattn::test::grid

// Cascade (prefix pass + suffix pass + merge) must equal plain attention over the whole sequence.
#define PAGEDATTN_GPU_CASCADE_GRID(Prefix, expect)                                          \
  TEST(Prefix##Cascade, SharedPrefixMatchesPlainAttention) {                                \
    PAGEDATTN_REQUIRE_CUDA_DEVICE();                                                        \
    expect(::pagedattn::test::grid::shared_prefix("cascade"), KVCacheLayout::kNHD);          \
  }                                                                                         \
  TEST(Prefix##Cascade, SinksCountOnce) {                                                   \
    PAGEDATTN_REQUIRE_CUDA_DEVICE();                                                        \
    using namespace ::pagedattn::test::grid;                                                \
    expect(with_sinks(shared_prefix("cascade")), KVCacheLayout::kNHD);                       \
  }                                                                                         \
  TEST(Prefix##Cascade, Fp8HndSoftcapF16) {                                                 \
    PAGEDATTN_REQUIRE_CUDA_DEVICE();                                                        \
    using namespace ::pagedattn::test::grid;                                                \
    expect(fp8_softcap_f16(shared_prefix("cascade")), KVCacheLayout::kHND);                  \
  }                                                                                         \
  TEST(Prefix##Cascade, DecodeBatchOverLongPrefix) {                                        \
    PAGEDATTN_REQUIRE_CUDA_DEVICE();                                                        \
    expect(::pagedattn::test::grid::decodes_over_long_prefix(), KVCacheLayout::kNHD);        \
  }                                                                                         \
  static_assert(true, "")

#define PAGEDATTN_GRID_SUITE(Suite, Param, body, values, expect)                       \
  class Suite : public ::testing::TestWithParam<Param> {};                             \
  TEST_P(Suite, MixedBatch) {                                                          \
    PAGEDATTN_REQUIRE_CUDA_DEVICE();                                                   \
    ::pagedattn::test::grid::body(GetParam(), expect);                                 \
  }                                                                                    \
  INSTANTIATE_TEST_SUITE_P(Grid, Suite, ::testing::ValuesIn(::pagedattn::test::grid::values), \
                           [](const ::testing::TestParamInfo<Param>& info) {           \
                             return ::pagedattn::test::grid::param_name(info.param);   \
                           })

#define PAGEDATTN_GPU_BACKEND_GRID(Prefix, expect)                                               \
  PAGEDATTN_GRID_SUITE(Prefix##HeadSize, int, head_size, kHeadSizes, expect);                   \
  PAGEDATTN_GRID_SUITE(Prefix##Gqa, ::pagedattn::test::grid::Heads, gqa, kHeads, expect);       \
  PAGEDATTN_GRID_SUITE(Prefix##Blocks, ::pagedattn::test::grid::BlockLayout, blocks, kBlocks,   \
                       expect);                                                                  \
  PAGEDATTN_GRID_SUITE(Prefix##Dtypes, ::pagedattn::test::grid::Dtypes, dtypes, kDtypes,        \
                       expect);                                                                  \
  class Prefix##Features : public ::testing::TestWithParam<::pagedattn::test::grid::Feature> {}; \
  TEST_P(Prefix##Features, MixedBatch) {                                                         \
    PAGEDATTN_REQUIRE_CUDA_DEVICE();                                                             \
    ::pagedattn::test::grid::feature(GetParam(), expect);                                        \
  }                                                                                              \
  INSTANTIATE_TEST_SUITE_P(                                                                      \
      Grid, Prefix##Features, ::testing::ValuesIn(::pagedattn::test::grid::kFeatures),           \
      [](const ::testing::TestParamInfo<::pagedattn::test::grid::Feature>& info) {               \
        return info.param.name;                                                                  \
      })
