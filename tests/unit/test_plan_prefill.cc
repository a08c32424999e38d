// The FLASHINFER host plan besides the decode plan: the prefill part's query starts and splits,
// the causal-trimmed tile count, the workspace layout, and vLLM's page arrays on the batches of
// vLLM's split tests (seq_lens 10 (i + 1), page 16).
#include <gtest/gtest.h>

#include <iterator>
#include <random>
#include <vector>

#include "plan/page_indptr.h"
#include "plan/prefill_plan.h"
#include "plan/workspace.h"

namespace pagedattn::plan {
namespace {

std::vector<int32_t> starts(const std::vector<int>& q_lens) {
  std::vector<int32_t> qsl{0};
  for (int q : q_lens) qsl.push_back(qsl.back() + q);
  return qsl;
}

TEST(PlanPrefill, DecodesGetEmptyQueryRangesAndKeepTokenOffsets) {
  const std::vector<int32_t> qsl = starts({1, 1, 1, 40, 7, 0});
  const std::vector<int32_t> seqs = {100, 5000, 3, 40, 9000, 12};
  SplitKVConfig config;
  std::vector<int32_t> cu(qsl.size(), -1), splits(seqs.size(), -1);
  auto plan = plan_prefill(qsl, seqs, 3, config, /*allow_splits=*/true, cu, splits);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->num_prefills, 3);
  EXPECT_EQ(cu, (std::vector<int32_t>{3, 3, 3, 3, 43, 50, 50}));
  EXPECT_EQ(splits[0], 1);  // decodes: one split (the decode kernel serves them)
  EXPECT_EQ(splits[2], 1);
  // The 7-token request over 9000 keys is short enough to split on an idle GPU.
  EXPECT_GT(splits[4], 1);
  EXPECT_EQ(plan->max_splits_used, splits[4]);

  std::vector<int32_t> det_splits(seqs.size(), -1);
  auto det = plan_prefill(qsl, seqs, 3, config, /*allow_splits=*/false, cu, det_splits);
  ASSERT_TRUE(det.ok());
  EXPECT_EQ(det->max_splits_used, 1);
  EXPECT_EQ(det_splits[4], -1);  // untouched: the launch does not read it

  auto bad = plan_prefill(qsl, seqs, 7, config, true, cu, splits);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("num_decodes 7"), std::string::npos);
}

TEST(PlanPrefill, TileWorkTrimsCausalAndWindowedTiles) {
  // One request, 128 new tokens after 128 of context, group 1, tiles of 64 rows and 64 keys:
  // row tile 0 (positions 128..191) sees key tiles 0..2, row tile 1 (192..255) tiles 0..3.
  const std::vector<int32_t> qsl = {0, 128}, seqs = {256};
  EXPECT_EQ(prefill_tile_work(qsl, seqs, 0, 1, 64, 64, -1), 3 + 4);
  // A window of 64 keys: tile 0 sees keys 64..191 (tiles 1..2), tile 1 keys 128..255 (2..3).
  EXPECT_EQ(prefill_tile_work(qsl, seqs, 0, 1, 64, 64, 64), 2 + 2);
  // Decodes are not prefill work.
  const std::vector<int32_t> qsl2 = {0, 1, 129}, seqs2 = {5000, 256};
  EXPECT_EQ(prefill_tile_work(qsl2, seqs2, 1, 1, 64, 64, -1), 3 + 4);
}

// FLASH_ATTN's routing: requests of at most the decode query length go to the decode kernel, the
// others to the prefill pass, each list in batch order.
TEST(RouteRequests, ByQueryLengthInBatchOrder) {
  const std::vector<int32_t> qsl = {0, 1, 41, 42, 50, 59, 59, 62};
  const std::vector<int32_t> seqs = {900, 4000, 1, 20, 3000, 7, 5};
  StepRouting routing;
  route_requests(qsl, seqs, 8, routing);
  EXPECT_EQ(routing.decodes, (std::vector<int32_t>{0, 2, 3, 5, 6}));
  EXPECT_EQ(routing.prefills, (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(routing.decode_max_query_len, 8);
  route_requests(qsl, seqs, 0, routing);  // only empty requests are "decodes"
  EXPECT_EQ(routing.decodes, (std::vector<int32_t>{5}));
  EXPECT_EQ(routing.decode_max_query_len, 0);
}

// The listed requests' schedule is plan_split_kv's over them alone; every other request gets 0.
TEST(PlanListedPrefill, SplitsTheListedAsTheirOwnBatch) {
  const std::vector<int32_t> qsl = {0, 1, 13, 14, 24};
  const std::vector<int32_t> seqs = {8000, 9000, 300, 6000};
  const std::vector<int32_t> listed = {1, 3};
  SplitKVConfig config;
  ListedPrefillScratch scratch;
  std::vector<int32_t> splits(4, -7);
  auto plan = plan_listed_prefill(qsl, seqs, listed, config, true, scratch, splits);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->num_prefills, 2);
  const std::vector<int32_t> own_qsl = {0, 12, 22}, own_seqs = {9000, 6000};
  EXPECT_EQ(scratch.query_start_loc, own_qsl);
  EXPECT_EQ(scratch.seq_lens, own_seqs);
  auto alone = plan_split_kv(own_qsl, own_seqs, config);
  ASSERT_TRUE(alone.ok());
  EXPECT_GT(alone->max_splits_used, 1);  // the case exercises splitting
  EXPECT_EQ(plan->max_splits_used, alone->max_splits_used);
  EXPECT_EQ(splits, (std::vector<int32_t>{0, alone->num_splits_per_req[0], 0,
                                          alone->num_splits_per_req[1]}));
  // Without splits each listed request gets 1; an index outside the step is refused.
  auto unsplit = plan_listed_prefill(qsl, seqs, listed, config, false, scratch, splits);
  ASSERT_TRUE(unsplit.ok());
  EXPECT_EQ(splits, (std::vector<int32_t>{0, 1, 0, 1}));
  const std::vector<int32_t> outside = {4};
  auto bad = plan_listed_prefill(qsl, seqs, outside, config, true, scratch, splits);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("request index 4"), std::string::npos);
}

TEST(PlanWorkspace, RegionsAreAlignedAndTheDecodePlanComesLast) {
  WorkspaceLimits limits;
  limits.max_num_reqs = 37;
  limits.max_num_tokens = 1000;
  limits.head_size = 96;
  const WorkspaceLayout l = workspace_layout(limits);
  const int64_t offsets[] = {l.prefill_cu_offset,   l.prefill_splits_offset,
                             l.pass_requests_offset, l.kv_indptr_offset,
                             l.last_page_len_offset, l.decode_plan_offset};
  for (size_t i = 0; i < std::size(offsets); ++i) {
    EXPECT_EQ(offsets[i] % 16, 0);
    if (i > 0) {
      EXPECT_GT(offsets[i], offsets[i - 1]);
    }
  }
  EXPECT_GE(l.prefill_splits_offset - l.prefill_cu_offset, 4 * (37 + 1));
  EXPECT_GE(l.kv_indptr_offset - l.pass_requests_offset, 4 * 37);
  EXPECT_EQ(l.int_bytes, l.decode_plan_offset + l.decode.plan_bytes);
  EXPECT_EQ(l.partial_out_floats, l.decode.max_partial_rows * 96);
  EXPECT_EQ(l.partial_lse_floats, l.decode.max_partial_rows);
}

// vLLM: indptr = [0, cumsum(ceil(seq / page))], last = seq % page, or page when that is 0 and
// seq > 0 (flashinfer.py _compute_flashinfer_kv_metadata).
TEST(PagedKvIndptr, MatchesVllmOnItsSplitTestBatches) {
  for (int n : {3, 4, 7, 8}) {
    std::vector<int32_t> seqs;
    for (int i = 0; i < n; ++i) seqs.push_back(10 * (i + 1));
    std::vector<int32_t> indptr(n + 1), last(n);
    paged_kv_indptr(seqs, 16, indptr, last);
    int pages = 0;
    EXPECT_EQ(indptr[0], 0);
    for (int i = 0; i < n; ++i) {
      pages += (seqs[i] + 15) / 16;
      EXPECT_EQ(indptr[i + 1], pages) << i;
      EXPECT_EQ(last[i], seqs[i] % 16 == 0 ? 16 : seqs[i] % 16) << i;
    }
  }
  const std::vector<int32_t> edge = {0, 16, 17, 1};
  std::vector<int32_t> indptr(5), last(4);
  paged_kv_indptr(edge, 16, indptr, last);
  EXPECT_EQ(indptr, (std::vector<int32_t>{0, 0, 1, 3, 4}));
  EXPECT_EQ(last, (std::vector<int32_t>{0, 16, 1, 1}));
  // The flattened page ids: each row's first pages, as vLLM's copy kernel writes them.
  const std::vector<int32_t> table = {9, 9, 9, 9,  //
                                      5, 8, 9, 9,  //
                                      7, 3, 2, 9,  //
                                      4, 9, 9, 9};
  std::vector<int32_t> indices(4);
  paged_kv_indices(table, 4, indptr, indices);
  EXPECT_EQ(indices, (std::vector<int32_t>{5, 7, 3, 4}));
}

// Every page size through both ways of dividing (a shift for powers of two, a division for
// others), against the formula: random lengths with the edges (0, multiples, one past).
TEST(PagedKvIndptr, EveryPageSizeMatchesTheFormula) {
  std::mt19937 rng(11);
  for (int page : {1, 16, 48, 64, 80, 1024, 1000}) {
    std::vector<int32_t> seqs = {0, page, page + 1, 1, 2 * page, 3 * page - 1};
    for (int i = 0; i < 37; ++i) seqs.push_back(static_cast<int32_t>(rng() % 70000));
    std::vector<int32_t> indptr(seqs.size() + 1, -7), last(seqs.size(), -7);
    paged_kv_indptr(seqs, page, indptr, last);
    int64_t pages = 0;
    ASSERT_EQ(indptr[0], 0);
    for (size_t i = 0; i < seqs.size(); ++i) {
      pages += (seqs[i] + page - 1) / page;
      EXPECT_EQ(indptr[i + 1], pages) << "page " << page << " request " << i;
      const int rem = seqs[i] % page;
      EXPECT_EQ(last[i], rem == 0 && seqs[i] > 0 ? page : rem)
          << "page " << page << " request " << i;
    }
  }
}

}  // namespace
}  // namespace pagedattn::plan
