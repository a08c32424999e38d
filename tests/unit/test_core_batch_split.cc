// vLLM's split_decodes_and_prefills and reorder_batch_to_split_decodes_and_prefills, checked
// against the expected results of vLLM's own tests (test_batch_reordering.py and
// test_attention_splitting.py).
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "pagedattn/metadata.h"
#include "test_core_batch.h"

namespace pagedattn {
namespace {

struct ReorderCase {
  std::string name;
  std::vector<ScheduledRequest> requests;  // (num_scheduled, num_computed, num_prompt)
  int threshold;
  std::vector<int> expected_order;
  bool expected_modified;
};

void PrintTo(const ReorderCase& c, std::ostream* os) { *os << c.name; }

class ReorderTable : public ::testing::TestWithParam<ReorderCase> {};

TEST_P(ReorderTable, MatchesVllm) {
  const ReorderCase& c = GetParam();
  const BatchReorder result = reorder_batch_to_split_decodes_and_prefills(c.requests, c.threshold);
  EXPECT_EQ(result.order, c.expected_order);
  EXPECT_EQ(result.modified, c.expected_modified);
}

INSTANTIATE_TEST_SUITE_P(
    Vllm, ReorderTable,
    ::testing::Values(
        ReorderCase{"all_decodes", {{1, 10, 10}, {1, 20, 20}, {1, 30, 30}}, 1, {0, 1, 2}, false},
        ReorderCase{"all_long_extends",
                    {{100, 100, 100}, {200, 200, 200}, {300, 300, 300}},
                    1,
                    {0, 1, 2},
                    false},
        ReorderCase{"mixed_decodes_long_extends",
                    {{100, 100, 100}, {1, 10, 10}, {200, 200, 200}, {1, 20, 20}},
                    1,
                    {3, 1, 2, 0},
                    true},
        ReorderCase{"already_ordered",
                    {{1, 10, 10}, {1, 20, 20}, {100, 100, 100}, {200, 0, 200}},
                    1,
                    {0, 1, 2, 3},
                    false},
        ReorderCase{"single_request", {{1, 10, 10}}, 1, {0}, false},
        ReorderCase{"higher_threshold",
                    {{2, 10, 10}, {3, 20, 20}, {5, 30, 30}, {6, 40, 40}},
                    4,
                    {0, 1, 2, 3},
                    false},
        ReorderCase{"decodes_at_end",
                    {{100, 100, 100}, {200, 200, 200}, {1, 10, 10}, {1, 20, 20}},
                    1,
                    {2, 3, 0, 1},
                    true},
        ReorderCase{"decode_long_extend_prefill",
                    {{100, 0, 100}, {10, 50, 50}, {1, 10, 10}},
                    1,
                    {2, 1, 0},
                    true},
        ReorderCase{"long_extend_prefill_only",
                    {{100, 0, 100}, {10, 50, 50}, {200, 0, 200}, {20, 75, 75}},
                    1,
                    {3, 1, 2, 0},
                    true},
        ReorderCase{"complicated_mixed",
                    {{1, 20, 20},
                     {1, 50, 50},
                     {374, 0, 374},
                     {300, 20, 20},
                     {1, 20, 20},
                     {256, 0, 256},
                     {1, 5, 5},
                     {27, 0, 27},
                     {1, 4, 4}},
                    1,
                    {0, 1, 6, 8, 4, 3, 2, 7, 5},
                    true},
        ReorderCase{"new_request_single_token_prefill",
                    {{100, 0, 100}, {1, 0, 1}, {50, 100, 100}, {1, 10, 10}},
                    1,
                    {3, 2, 0, 1},
                    true},
        ReorderCase{"multiple_new_requests_single_token_prefill",
                    {{1, 0, 1}, {1, 0, 1}, {1, 50, 50}, {200, 0, 200}},
                    1,
                    {2, 1, 0, 3},
                    true},
        ReorderCase{"four_way_already_ordered",
                    {{1, 100, 100}, {1, 50, 100}, {10, 50, 100}, {100, 0, 100}},
                    1,
                    {0, 1, 2, 3},
                    false},
        ReorderCase{"four_way_needs_reorder",
                    {{100, 0, 100}, {1, 50, 100}, {1, 100, 100}, {10, 50, 100}},
                    1,
                    {2, 1, 3, 0},
                    true},
        ReorderCase{"four_way_multiple_short_extends",
                    {{2, 100, 100}, {2, 50, 200}, {2, 75, 150}, {2, 200, 200}},
                    2,
                    {0, 3, 2, 1},
                    true},
        ReorderCase{"four_way_spec_decode_threshold",
                    {{5, 100, 100}, {5, 50, 100}, {5, 0, 100}, {10, 50, 100}},
                    5,
                    {0, 1, 3, 2},
                    true}),
    [](const ::testing::TestParamInfo<ReorderCase>& info) { return info.param.name; });

TEST(Reorder, EmptyBatchIsUnmodified) {
  const BatchReorder result = reorder_batch_to_split_decodes_and_prefills({}, 1);
  EXPECT_TRUE(result.order.empty());
  EXPECT_FALSE(result.modified);
}

struct SplitCase {
  std::vector<int> query_lens;
  int threshold;
  bool require_uniform;
  int padded_tokens;  // -1: none
  DecodePrefillSplit expected;
};

void PrintTo(const SplitCase& c, std::ostream* os) {
  *os << "query_lens [";
  for (int q : c.query_lens) *os << q << " ";
  *os << "] threshold " << c.threshold << (c.require_uniform ? " uniform" : "");
}

class SplitTable : public ::testing::TestWithParam<SplitCase> {};

TEST_P(SplitTable, MatchesVllm) {
  const SplitCase& c = GetParam();
  std::vector<int> seq_lens;
  for (size_t i = 0; i < c.query_lens.size(); ++i) seq_lens.push_back(10 * static_cast<int>(i + 1));
  core_test::TestBatch batch =
      core_test::make_test_batch(c.query_lens, seq_lens, 16, c.padded_tokens);
  ASSERT_TRUE(batch.meta.validate(batch.block_size, batch.num_blocks).ok());
  const DecodePrefillSplit split =
      split_decodes_and_prefills(batch.meta, c.threshold, c.require_uniform);
  EXPECT_EQ(split.num_decodes, c.expected.num_decodes);
  EXPECT_EQ(split.num_prefills, c.expected.num_prefills);
  EXPECT_EQ(split.num_decode_tokens, c.expected.num_decode_tokens);
  EXPECT_EQ(split.num_prefill_tokens, c.expected.num_prefill_tokens);
}

INSTANTIATE_TEST_SUITE_P(
    Vllm, SplitTable,
    ::testing::Values(SplitCase{{1, 1, 1}, 1, false, -1, {3, 0, 3, 0}},
                      SplitCase{{1, 2, 1, 3, 2, 1, 2}, 3, false, -1, {7, 0, 12, 0}},
                      SplitCase{{4, 5, 6, 7}, 3, false, -1, {0, 4, 0, 22}},
                      SplitCase{{2, 1, 3, 4, 5, 6, 7, 8}, 4, false, -1, {4, 4, 10, 26}},
                      SplitCase{{1, 1, 1}, 1, true, -1, {3, 0, 3, 0}},
                      SplitCase{{2, 2, 1, 3, 2, 1, 2}, 3, true, -1, {2, 5, 4, 9}},
                      SplitCase{{4, 5, 6, 7}, 3, true, -1, {0, 4, 0, 22}},
                      SplitCase{{2, 2, 2, 4, 5, 6, 7, 8}, 4, true, -1, {3, 5, 6, 30}},
                      SplitCase{{2, 1, 2, 4, 5, 6, 7, 8}, 4, true, -1, {1, 7, 2, 33}},
                      SplitCase{{2, 2, 2, 0}, 3, true, 8, {4, 0, 8, 0}}));

TEST(Split, ShortExtendsCountAsPrefillsWhenAsked) {
  // Requests 0 and 1 are single-token; request 1 is still prefilling its prompt (a short extend).
  core_test::TestBatch batch = core_test::make_test_batch({1, 1, 5}, {10, 12, 30});
  batch.is_prefilling = {0, 1, 1};
  batch.refresh();
  EXPECT_EQ(split_decodes_and_prefills(batch.meta, 1, false, true),
            (DecodePrefillSplit{2, 1, 2, 5}));
  EXPECT_EQ(split_decodes_and_prefills(batch.meta, 1, false, false),
            (DecodePrefillSplit{1, 2, 1, 6}));
}

TEST(Split, AllDecodesWithShortExtendsExcludedStillSplitsByPrefilling) {
  core_test::TestBatch batch = core_test::make_test_batch({1, 1}, {10, 12});
  batch.is_prefilling = {0, 1};
  batch.refresh();
  EXPECT_EQ(split_decodes_and_prefills(batch.meta, 1, false, false),
            (DecodePrefillSplit{1, 1, 1, 1}));
  batch.is_prefilling = {0, 0};
  batch.refresh();
  EXPECT_EQ(split_decodes_and_prefills(batch.meta, 1, false, false),
            (DecodePrefillSplit{2, 0, 2, 0}));
}

TEST(Split, NaiveQueryLens) {
  core_test::TestBatch batch = core_test::make_test_batch({3, 0, 7}, {5, 9, 7});
  EXPECT_EQ(batch.meta.naive_query_lens(), (std::vector<int32_t>{3, 0, 7}));
  EXPECT_EQ(batch.meta.batch_size(), 3);
  EXPECT_TRUE(CommonAttentionMetadata{}.naive_query_lens().empty());
}

}  // namespace
}  // namespace pagedattn
