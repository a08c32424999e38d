// The random paged batch: deterministic per seed, shuffled and shared blocks, context in the cache,
// new tokens and every unused element NaN, slots where the block table says, FP8 scales from amax.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "common/numeric.h"
#include "testing/host_batch.h"

namespace pagedattn::testing {
namespace {

CaseSpec small_case() {
  CaseSpec spec;
  spec.name = "t";
  spec.seed = 3;
  spec.num_heads = 8;
  spec.num_kv_heads = 2;
  spec.head_size = 40;
  spec.block_size = 16;
  spec.seq_lens = {70, 33, 48, 1};
  spec.query_lens = {5, 1, 0, 1};
  return spec;
}

float cache_at(const HostBatch& b, int64_t block, int plane, int64_t offset, int64_t h, int64_t e) {
  const TensorView& c = b.kv_cache.view();
  return load_as_float(c.data(), c.dtype(),
                       block * c.stride(0) + plane * c.stride(1) + offset * c.stride(2) +
                           h * c.stride(3) + e * c.stride(4));
}

// Token j of request r: every element of K and V is finite iff j is context (written).
void expect_cache_contents(const HostBatch& b) {
  const CaseSpec& s = b.spec;
  const int64_t width = b.block_table.view().size(1);
  int64_t finite_expected = 0;
  std::set<std::pair<int64_t, int64_t>> context_slots;
  for (int r = 0; r < s.num_reqs(); ++r) {
    const int context = s.seq_lens[r] - s.query_lens[r];
    for (int j = 0; j < s.seq_lens[r]; ++j) {
      const int64_t block = b.block_table.data<int32_t>()[r * width + j / s.block_size];
      const bool written = j < context;
      if (written && context_slots.insert({block, j % s.block_size}).second) {
        finite_expected += 2LL * s.num_kv_heads * s.head_size;
      }
      for (int plane = 0; plane < 2; ++plane) {
        EXPECT_EQ(std::isfinite(cache_at(b, block, plane, j % s.block_size, 1, 3)), written)
            << "request " << r << " token " << j << " plane " << plane;
      }
    }
  }
  // Nothing else in the whole cache is finite.
  const TensorView& c = b.kv_cache.view();
  int64_t finite = 0;
  for (int64_t i = 0; i < c.numel(); ++i)
    finite += std::isfinite(load_as_float(c.data(), c.dtype(), i));
  EXPECT_EQ(finite, finite_expected);
}

TEST(HostBatch, ShapesSlotsAndNaNCache) {
  CaseSpec spec = small_case();
  auto b = make_host_batch(spec, KVCacheLayout::kNHD);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  const int64_t t = spec.num_tokens();
  EXPECT_EQ(b->query.view().describe(), "bf16[7, 8, 40] cpu");
  EXPECT_EQ(b->key.view().describe(), "bf16[7, 2, 40] cpu");
  EXPECT_EQ(b->block_table.view().size(0), 4);
  EXPECT_EQ(b->block_table.view().size(1), 5);  // ceil(70 / 16)
  // 5 + 3 + 3 + 1 blocks used, a few spares.
  EXPECT_GE(b->num_blocks, 12);
  const int32_t* qsl = b->query_start_loc.data<int32_t>();
  EXPECT_EQ(qsl[0], 0);
  EXPECT_EQ(qsl[4], t);
  // Slots: where the block table puts the new tokens' positions.
  const int64_t width = b->block_table.view().size(1);
  for (int r = 0, i = 0; r < spec.num_reqs(); ++r) {
    for (int k = 0; k < spec.query_lens[r]; ++k, ++i) {
      const int p = spec.seq_lens[r] - spec.query_lens[r] + k;
      const int64_t block = b->block_table.data<int32_t>()[r * width + p / 16];
      EXPECT_EQ(b->slot_mapping.data<int64_t>()[i], block * 16 + p % 16);
    }
  }
  expect_cache_contents(*b);
  // Inputs are N(0, 1) rounded to bf16: representable exactly, never all equal.
  const float q0 = load_as_float(b->query.view().data(), DType::kBF16, 0);
  EXPECT_EQ(q0, bf16_bits_to_float(float_to_bf16_bits(q0)));
  EXPECT_NE(q0, load_as_float(b->query.view().data(), DType::kBF16, 1));
  EXPECT_EQ(b->k_scale.data<float>()[0], 1.0f);
  EXPECT_NEAR(b->params.scale, 1.0 / std::sqrt(40.0), 1e-7);
}

TEST(HostBatch, BlocksShuffledUniqueAndPrefixShared) {
  CaseSpec spec = small_case();
  spec.seq_lens = {70, 40, 48, 33};
  spec.query_lens = {5, 1, 0, 1};
  spec.common_prefix_len = 32;
  auto b = make_host_batch(spec, KVCacheLayout::kNHD);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  const int64_t width = b->block_table.view().size(1);
  const int32_t* table = b->block_table.data<int32_t>();
  std::set<int32_t> own;
  bool contiguous = true;
  for (int r = 0; r < spec.num_reqs(); ++r) {
    EXPECT_EQ(table[r * width + 0], table[0]);
    EXPECT_EQ(table[r * width + 1], table[1]);
    const int blocks = (spec.seq_lens[r] + 15) / 16;
    for (int k = 2; k < blocks; ++k) {
      EXPECT_TRUE(own.insert(table[r * width + k]).second) << "block reused";
      EXPECT_LT(table[r * width + k], b->num_blocks);
      if (k > 2 && table[r * width + k] != table[r * width + k - 1] + 1) contiguous = false;
    }
  }
  EXPECT_FALSE(contiguous);
  EXPECT_FALSE(own.count(table[0]) || own.count(table[1]));
  expect_cache_contents(*b);
}

TEST(HostBatch, DeterministicPerSeed) {
  CaseSpec spec = small_case();
  auto a = make_host_batch(spec, KVCacheLayout::kNHD);
  auto b = make_host_batch(spec, KVCacheLayout::kNHD);
  spec.seed = 4;
  auto c = make_host_batch(spec, KVCacheLayout::kNHD);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const size_t n = static_cast<size_t>(a->kv_cache.nbytes());
  EXPECT_EQ(std::memcmp(a->kv_cache.view().data(), b->kv_cache.view().data(), n), 0);
  EXPECT_EQ(std::memcmp(a->query.view().data(), b->query.view().data(), a->query.view().nbytes()),
            0);
  EXPECT_NE(std::memcmp(a->query.view().data(), c->query.view().data(), a->query.view().nbytes()),
            0);
}

TEST(HostBatch, HNDHoldsTheSameLogicalValues) {
  CaseSpec spec = small_case();
  auto nhd = make_host_batch(spec, KVCacheLayout::kNHD);
  auto hnd = make_host_batch(spec, KVCacheLayout::kHND);
  ASSERT_TRUE(nhd.ok() && hnd.ok());
  EXPECT_NE(nhd->kv_cache.view().stride(2), hnd->kv_cache.view().stride(2));
  const int32_t block = nhd->block_table.data<int32_t>()[0];
  for (int off = 0; off < 16; ++off) {
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(cache_at(*nhd, block, 1, off, h, 7), cache_at(*hnd, block, 1, off, h, 7));
    }
  }
  expect_cache_contents(*hnd);
}

TEST(HostBatch, FP8ScalesFromAmax) {
  for (bool per_head : {false, true}) {
    CaseSpec spec = small_case();
    spec.kv_cache_dtype = KVCacheDType::kFP8E4M3;
    spec.kv_scale_per_head = per_head;
    auto b = make_host_batch(spec, KVCacheLayout::kNHD);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(b->kv_cache.view().dtype(), DType::kFP8E4M3);
    ASSERT_EQ(b->k_scale.view().numel(), per_head ? 2 : 1);
    // amax / 64 of N(0, 1) data over hundreds of tokens: about 3.5-5.5 / 64.
    for (int i = 0; i < b->k_scale.view().numel(); ++i) {
      EXPECT_GT(b->k_scale.data<float>()[i], 2.5f / 64);
      EXPECT_LT(b->v_scale.data<float>()[i], 6.5f / 64);
    }
    // Stored values stay within +-64 (amax maps to 64), never saturated at 448.
    const TensorView& c = b->kv_cache.view();
    float stored_max = 0.0f;
    for (int64_t i = 0; i < c.numel(); ++i) {
      const float x = fp8_e4m3_to_float(c.data_as<uint8_t>()[i]);
      if (std::isfinite(x)) stored_max = std::max(stored_max, std::fabs(x));
    }
    EXPECT_GT(stored_max, 32.0f);
    EXPECT_LE(stored_max, 64.0f);
    expect_cache_contents(*b);
  }
}

TEST(HostBatch, FeaturesFillParams) {
  CaseSpec spec = small_case();
  spec.alibi = true;
  spec.sinks = true;
  spec.sliding_window = SlidingWindow{7, 0};
  spec.logits_soft_cap = 20.0;
  spec.scale = 0.5;
  auto b = make_host_batch(spec, KVCacheLayout::kHND);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->params.alibi_slopes, alibi_slopes(8));
  ASSERT_EQ(b->params.sinks.size(), 8u);
  EXPECT_NE(b->params.sinks[0], b->params.sinks[1]);
  EXPECT_EQ(b->params.sliding_window, (SlidingWindow{7, 0}));
  EXPECT_EQ(b->params.logits_soft_cap, 20.0f);
  EXPECT_EQ(b->params.scale, 0.5f);
  EXPECT_EQ(b->params.kv_layout, KVCacheLayout::kHND);
  EXPECT_EQ(b->params.num_kv_heads, 2);
}

TEST(HostBatch, TooFewBlocksIsAnError) {
  CaseSpec spec = small_case();
  spec.num_blocks = 5;
  auto b = make_host_batch(spec, KVCacheLayout::kNHD);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("num_blocks"), std::string::npos);
}

}  // namespace
}  // namespace pagedattn::testing
