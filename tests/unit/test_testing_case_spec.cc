// Case-file parsing: defaults, every field, and errors that name the field.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "testing/case_spec.h"

namespace pagedattn::testing {
namespace {

TEST(CaseSpec, DefaultsFromMinimalCase) {
  auto spec = parse_case_json(R"({"seq_lens": [5, 9], "query_lens": [1, 3]})", "minimal");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->name, "minimal");
  EXPECT_EQ(spec->seed, 0u);
  EXPECT_EQ(spec->dtype, DType::kBF16);
  EXPECT_EQ(spec->kv_cache_dtype, KVCacheDType::kAuto);
  EXPECT_FALSE(spec->kv_scale_per_head);
  EXPECT_EQ(spec->num_heads, 32);
  EXPECT_EQ(spec->num_kv_heads, 8);
  EXPECT_EQ(spec->head_size, 128);
  EXPECT_EQ(spec->block_size, 16);
  EXPECT_FALSE(spec->kv_layout.has_value());
  EXPECT_TRUE(spec->causal);
  EXPECT_FALSE(spec->scale.has_value());
  EXPECT_FALSE(spec->sliding_window.has_value());
  EXPECT_EQ(spec->logits_soft_cap, 0.0);
  EXPECT_FALSE(spec->alibi);
  EXPECT_FALSE(spec->sinks);
  EXPECT_EQ(spec->common_prefix_len, 0);
  EXPECT_FALSE(spec->num_blocks.has_value());
  EXPECT_EQ(spec->num_tokens(), 4);
}

TEST(CaseSpec, EveryFieldParsedAndRoundTrips) {
  const std::string text =
      R"({"name": "all", "seed": 7, "dtype": "f16", "kv_cache_dtype": "fp8_e5m2",
    "kv_scale": "head", "num_heads": 12, "num_kv_heads": 4, "head_size": 80, "block_size": 32,
    "kv_layout": "HND", "seq_lens": [64, 70], "query_lens": [0, 6], "causal": false, "scale": 0.25,
    "sliding_window": [15, -1], "logits_soft_cap": 30.0, "alibi": true, "sinks": true,
    "common_prefix_len": 32, "num_blocks": 40})";
  auto spec = parse_case_json(text, "x");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->name, "all");
  EXPECT_EQ(spec->seed, 7u);
  EXPECT_EQ(spec->dtype, DType::kF16);
  EXPECT_EQ(spec->kv_cache_dtype, KVCacheDType::kFP8E5M2);
  EXPECT_TRUE(spec->kv_scale_per_head);
  EXPECT_EQ(spec->head_size, 80);
  EXPECT_EQ(spec->kv_layout, KVCacheLayout::kHND);
  EXPECT_EQ(*spec->scale, 0.25);
  EXPECT_EQ(spec->sliding_window->left, 15);
  EXPECT_EQ(spec->sliding_window->right, -1);
  EXPECT_EQ(spec->logits_soft_cap, 30.0);
  EXPECT_EQ(*spec->num_blocks, 40);
  auto again = parse_case_json(case_to_json(*spec), "y");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(case_to_json(*again), case_to_json(*spec));
}

void expect_error(const std::string& text, const std::string& must_mention) {
  auto spec = parse_case_json(text, "bad");
  ASSERT_FALSE(spec.ok()) << "accepted: " << text;
  EXPECT_NE(spec.status().message().find(must_mention), std::string::npos)
      << spec.status().message();
}

TEST(CaseSpec, ErrorsNameTheField) {
  const std::string lens = R"("seq_lens": [8], "query_lens": [1])";
  expect_error("{" + lens + R"(, "colour": 1})", "colour");
  expect_error("{" + lens + R"(, "dtype": "fp32"})", "f16, bf16, f32");
  expect_error("{" + lens + R"(, "kv_cache_dtype": "int8"})", "kv_cache_dtype");
  expect_error("{" + lens + R"(, "kv_scale": "block"})", "tensor, head");
  expect_error("{" + lens + R"(, "num_heads": "32"})", "num_heads");
  expect_error("{" + lens + R"(, "block_size": 0})", "block_size");
  expect_error("{" + lens + R"(, "kv_layout": "NCHW"})", "NHD, HND");
  expect_error("{" + lens + R"(, "causal": 1})", "causal");
  expect_error("{" + lens + R"(, "sliding_window": [3]})", "sliding_window");
  expect_error("{" + lens + R"(, "scale": "big"})", "scale");
  expect_error("{" + lens + R"(, "seed": -1})", "seed");
  expect_error(R"({"query_lens": [1]})", "seq_lens");
  expect_error(R"({"seq_lens": [4], "query_lens": [5]})", "query_len");
  expect_error(R"({"seq_lens": [4, 5], "query_lens": [1]})", "query_lens");
  expect_error(R"({"seq_lens": [4], "query_lens": [0]})", "at least one token");
  expect_error(R"({"seq_lens": [40, 40], "query_lens": [1, 1], "common_prefix_len": 8})",
               "multiple of block_size");
  expect_error(R"({"seq_lens": [40, 20], "query_lens": [1, 5], "common_prefix_len": 16})",
               "context length");
  expect_error(R"({"seq_lens": [8], "query_lens": [1], "num_heads": 6, "num_kv_heads": 4})",
               "num_kv_heads");
  expect_error("[1, 2]", "JSON object");
  expect_error("{not json", "JSON");
}

TEST(CaseSpec, AlibiSlopes) {
  auto s8 = alibi_slopes(8);
  ASSERT_EQ(s8.size(), 8u);
  for (int h = 0; h < 8; ++h) EXPECT_FLOAT_EQ(s8[h], std::pow(2.0f, -8.0f * (h + 1) / 8));
  // 12 heads: 8 slopes of the power-of-two rule, then the odd slopes of the 16-head sequence.
  auto s12 = alibi_slopes(12);
  ASSERT_EQ(s12.size(), 12u);
  EXPECT_FLOAT_EQ(s12[7], std::pow(2.0f, -8.0f));
  EXPECT_FLOAT_EQ(s12[8], std::pow(2.0f, -0.5f));
  EXPECT_FLOAT_EQ(s12[9], std::pow(2.0f, -1.5f));
  EXPECT_FLOAT_EQ(s12[11], std::pow(2.0f, -3.5f));
}

}  // namespace
}  // namespace pagedattn::testing
