// CPU_ATTN under decode context parallelism: N ranks (threads over the in-process group) each
// store 1/N of every sequence's tokens; each rank's output for its heads must equal the N = 1
// CPU_ATTN result and the float64 oracle on random steps mixing decodes, spec-verify-like
// multi-token decodes, chunked prefills and a prefill without context, with GQA, FP8, windows,
// sinks and soft caps; unused cache slots are NaN and block ids shuffled on every rank.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "common/numeric.h"
#include "pagedattn/dcp_combine.h"
#include "reference/attention_ref.h"
#include "reference/compare.h"
#include "support/cpu_run.h"
#include "unit/dcp_cpu_step.h"
#include "unit/dcp_printers.h"

namespace pagedattn {
namespace {

using testing::CaseSpec;
using testing::DcpRankStep;
using testing::HostBatch;

enum class Feature { kGqaF32, kFp8Hnd, kWindow, kSinks, kSoftCap, kNonCausal };

std::string feature_name(Feature f) {
  switch (f) {
    case Feature::kGqaF32: return "gqa_f32";
    case Feature::kFp8Hnd: return "fp8_hnd";
    case Feature::kWindow: return "window";
    case Feature::kSinks: return "sinks";
    case Feature::kSoftCap: return "softcap";
    case Feature::kNonCausal: return "noncausal";
  }
  return "";
}

void PrintTo(Feature f, std::ostream* os) {
  *os << feature_name(f);
}

constexpr int kBlockSize = 32;
constexpr int kHeadsPerRank = 2;

// Decodes (one of them with a single key), spec-verify decodes of 4, chunked prefills (the last
// one inside the window's reach from every row) and a prefill without context; N * 2 query heads
// over 2 KV heads (GQA for every N).
CaseSpec case_for(Feature feature, int world_size) {
  CaseSpec spec;
  spec.name = feature_name(feature);
  spec.seed = 1234 + static_cast<int>(feature) * 17 + world_size;
  spec.dtype = DType::kBF16;
  spec.num_heads = kHeadsPerRank * world_size;
  spec.num_kv_heads = 2;
  spec.head_size = 64;
  spec.block_size = kBlockSize;
  spec.seq_lens = {1, 3, 77, 514, 150, 300, 40, 261, 60};
  spec.query_lens = {1, 1, 1, 1, 4, 40, 40, 17, 20};
  switch (feature) {
    case Feature::kGqaF32: spec.dtype = DType::kF32; break;
    case Feature::kFp8Hnd:
      spec.kv_cache_dtype = KVCacheDType::kFP8E4M3;
      spec.kv_scale_per_head = true;
      spec.kv_layout = KVCacheLayout::kHND;
      break;
    case Feature::kWindow: spec.sliding_window = SlidingWindow{99, 0}; break;
    case Feature::kSinks: spec.sinks = true; break;
    case Feature::kSoftCap: spec.logits_soft_cap = 2.0; break;
    case Feature::kNonCausal: spec.causal = false; break;
  }
  return spec;
}

// The oracle over the whole batch (its cache holds every token once the N = 1 run wrote them).
reference::ReferenceOutputs oracle(const HostBatch& batch) {
  reference::ReferenceInputs in;
  in.query = batch.query.view();
  in.kv_cache = batch.kv_cache.view();
  in.block_table = batch.block_table.view();
  in.seq_lens = batch.seq_lens.view();
  in.query_start_loc = batch.query_start_loc.view();
  in.scales = batch.scales();
  in.causal = batch.spec.causal;
  StatusOr<reference::ReferenceOutputs> out = reference::reference_attention(in, batch.params);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *std::move(out) : reference::ReferenceOutputs{};
}

// Heads [first, first + count) of out [T, H, D] and lse [H, T].
reference::ReferenceOutputs head_slice(const std::vector<double>& out,
                                       const std::vector<double>& lse, int64_t tokens,
                                       int64_t heads, int64_t dim, int64_t first, int64_t count) {
  reference::ReferenceOutputs slice;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = first; h < first + count; ++h) {
      for (int64_t d = 0; d < dim; ++d) slice.out.push_back(out[(t * heads + h) * dim + d]);
    }
  }
  for (int64_t h = first; h < first + count; ++h) {
    for (int64_t t = 0; t < tokens; ++t) slice.lse.push_back(lse[h * tokens + t]);
  }
  return slice;
}

std::vector<double> as_doubles(const TensorView& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = load_as_float(t.data(), t.dtype(), i);
  return v;
}

class DcpCpuForward
    : public ::testing::TestWithParam<std::tuple<int, int, DcpCommBackend, Feature>> {};

TEST_P(DcpCpuForward, EachRankEqualsOneRankAndTheOracle) {
  const auto [world_size, interleave, path, feature] = GetParam();
  const CaseSpec spec = case_for(feature, world_size);
  const KVCacheLayout layout = spec.kv_layout.value_or(KVCacheLayout::kNHD);
  StatusOr<HostBatch> made = testing::make_host_batch(spec, layout);
  ASSERT_TRUE(made.ok()) << made.status().message();
  HostBatch& batch = *made;

  // N = 1: plain CPU_ATTN over the whole cache, itself within the oracle's tolerance.
  StatusOr<cpu_test::RunResult> single = cpu_test::run_against_reference(batch);
  ASSERT_TRUE(single.ok()) << single.status().message();
  ASSERT_TRUE(single->comparison.pass) << single->comparison;
  const reference::ReferenceOutputs exact = oracle(batch);
  const std::vector<double> single_out = as_doubles(single->output.view());
  const std::vector<double> single_lse = as_doubles(single->lse.view());

  StatusOr<std::vector<std::unique_ptr<Communicator>>> group = make_in_process_group(world_size);
  ASSERT_TRUE(group.ok());
  std::vector<DcpRankStep> steps;
  steps.reserve(world_size);
  for (int r = 0; r < world_size; ++r) {
    StatusOr<DcpRankStep> step =
        testing::make_dcp_rank_step(batch, world_size, r, interleave, (*group)[r].get(), path);
    ASSERT_TRUE(step.ok()) << step.status().message();
    steps.push_back(std::move(*step));
  }
  for (const Status& s : testing::run_dcp_ranks(batch, steps, *group)) {
    ASSERT_TRUE(s.ok()) << s.message();
  }

  const int64_t tokens = spec.num_tokens();
  const reference::Tolerance tol = reference::tolerance_for(spec.dtype);
  for (const DcpRankStep& step : steps) {
    const int64_t first = int64_t{step.rank} * kHeadsPerRank;
    const auto want = head_slice(exact.out, exact.lse, tokens, spec.num_heads, spec.head_size,
                                 first, kHeadsPerRank);
    const reference::Comparison vs_oracle = reference::compare_to_reference(
        step.output.view(), step.lse.view(), want.out, want.lse, tol);
    EXPECT_TRUE(vs_oracle.pass) << "rank " << step.rank << " vs the oracle: " << vs_oracle;
    const auto one_rank = head_slice(single_out, single_lse, tokens, spec.num_heads, spec.head_size,
                                     first, kHeadsPerRank);
    const reference::Comparison vs_single = reference::compare_to_reference(
        step.output.view(), step.lse.view(), one_rank.out, one_rank.lse, tol);
    EXPECT_TRUE(vs_single.pass) << "rank " << step.rank << " vs N = 1: " << vs_single;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Grid, DcpCpuForward,
    ::testing::Combine(::testing::Values(2, 4, 8), ::testing::Values(1, 16, kBlockSize),
                       ::testing::Values(DcpCommBackend::kAgRs, DcpCommBackend::kA2a),
                       ::testing::Values(Feature::kGqaF32, Feature::kFp8Hnd, Feature::kWindow,
                                         Feature::kSinks, Feature::kSoftCap, Feature::kNonCausal)),
    [](const auto& info) {
      return "n" + std::to_string(std::get<0>(info.param)) + "_i" +
             std::to_string(std::get<1>(info.param)) + "_" +
             std::string(dcp_comm_backend_name(std::get<2>(info.param))) + "_" +
             feature_name(std::get<3>(info.param));
    });

}  // namespace
}  // namespace pagedattn
