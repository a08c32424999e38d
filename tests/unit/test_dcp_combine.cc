// The DCP combine paths against single-rank attention. Each rank's partial attention is computed
// by a float64 reference over the keys the rank stores (dcp_owner_rank), rounded to the tested
// dtype; empty ranks' outputs are NaN (unused memory) wherever the row has keys elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "common/numeric.h"
#include "pagedattn/dcp_combine.h"
#include "unit/dcp_partials.h"
#include "unit/dcp_printers.h"
#include "unit/dcp_ranks.h"

namespace pagedattn {
namespace {

using testing::DcpRows;
using testing::run_on_ranks;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// One rank's combine inputs and results, in the tested dtype.
struct RankBuffers {
  std::vector<char> partial_out;   // [T, H, D]
  std::vector<float> partial_lse;  // [H, T]
  std::vector<char> out;           // [T, H / N, D]
  std::vector<float> out_lse;      // [H / N, T]
};

std::vector<char> to_dtype(const std::vector<float>& values, DType dtype) {
  std::vector<char> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) store_from_float(bytes.data(), dtype, i, values[i]);
  return bytes;
}

std::vector<RankBuffers> partials(const DcpRows& rows, int world_size, int interleave,
                                  DType dtype) {
  std::vector<RankBuffers> ranks(world_size);
  for (int r = 0; r < world_size; ++r) {
    std::vector<float> out;
    std::vector<float> lse;
    rows.attend([&](int64_t j) { return dcp_owner_rank(j, world_size, interleave) == r; }, out,
                lse);
    for (int64_t t = 0; t < rows.num_tokens; ++t) {
      for (int64_t h = 0; h < rows.num_heads; ++h) {
        if (lse[h * rows.num_tokens + t] != -kInf || rows.lengths[t] == 0) continue;
        for (int64_t d = 0; d < rows.head_size; ++d)
          out[(t * rows.num_heads + h) * rows.head_size + d] = kNaN;
      }
    }
    ranks[r].partial_out = to_dtype(out, dtype);
    ranks[r].partial_lse = lse;
    ranks[r].out.resize(out.size() / world_size * dtype_size(dtype));
    ranks[r].out_lse.resize(lse.size() / world_size);
  }
  return ranks;
}

// Runs `backend` on every rank over its buffers.
std::vector<Status> combine(std::vector<RankBuffers>& ranks, const DcpRows& rows, DType dtype,
                            DcpCommBackend backend) {
  const int world_size = static_cast<int>(ranks.size());
  auto group = make_in_process_group(world_size);
  EXPECT_TRUE(group.ok());
  const int64_t T = rows.num_tokens, H = rows.num_heads, D = rows.head_size;
  return run_on_ranks(*group, [&](Communicator& c) {
    RankBuffers& b = ranks[c.rank()];
    return dcp_combine(
        c, backend, TensorView(b.partial_out.data(), dtype, Device::cpu(), {T, H, D}),
        TensorView(b.partial_lse.data(), DType::kF32, Device::cpu(), {H, T}),
        TensorView(b.out.data(), dtype, Device::cpu(), {T, H / world_size, D}),
        TensorView(b.out_lse.data(), DType::kF32, Device::cpu(), {H / world_size, T}));
  });
}

// Largest |combined - exact| over every rank's head slice (NaN counts as infinite); LSEs are
// expected to match closely.
double max_error(const std::vector<RankBuffers>& ranks, const DcpRows& rows, DType dtype) {
  std::vector<float> exact_out;
  std::vector<float> exact_lse;
  rows.attend([](int64_t) { return true; }, exact_out, exact_lse);
  const int world_size = static_cast<int>(ranks.size());
  const int64_t T = rows.num_tokens, H = rows.num_heads, D = rows.head_size, Hs = H / world_size;
  double worst = 0.0;
  for (int r = 0; r < world_size; ++r) {
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t hl = 0; hl < Hs; ++hl) {
        const int64_t h = r * Hs + hl;
        const float lse = ranks[r].out_lse[hl * T + t];
        const float want = exact_lse[h * T + t];
        if (want == -kInf) {
          EXPECT_EQ(lse, -kInf) << "rank " << r << " token " << t << " head " << h;
        } else {
          EXPECT_NEAR(lse, want, 1e-5 * (1.0 + std::fabs(want))) << "rank " << r << " token " << t;
        }
        for (int64_t d = 0; d < D; ++d) {
          const double got = load_as_float(ranks[r].out.data(), dtype, (t * Hs + hl) * D + d);
          const double error = std::fabs(got - exact_out[(t * H + h) * D + d]);
          worst = std::isnan(error) ? kInf : std::max(worst, error);
        }
      }
    }
  }
  return worst;
}

double tolerance(DType dtype) {
  return dtype == DType::kF32 ? 1e-5 : dtype == DType::kF16 ? 3e-3 : 1.6e-2;
}

// Row lengths: empty, shorter than one turn of the ranks, and long.
std::vector<int64_t> row_lengths() {
  return {0, 1, 5, 17, 130, 301, 64, 999};
}

class CombineTest : public ::testing::TestWithParam<std::tuple<DcpCommBackend, int, int, DType>> {};

TEST_P(CombineTest, EqualsSingleRankAttention) {
  const auto [backend, world_size, interleave, dtype] = GetParam();
  const DcpRows rows = DcpRows::random(8, 16, 4, 32, row_lengths(), 36 + world_size);
  auto ranks = partials(rows, world_size, interleave, dtype);
  for (const Status& s : combine(ranks, rows, dtype, backend)) ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_LE(max_error(ranks, rows, dtype), tolerance(dtype));
}

INSTANTIATE_TEST_SUITE_P(
    Dcp, CombineTest,
    ::testing::Combine(::testing::Values(DcpCommBackend::kAgRs, DcpCommBackend::kA2a),
                       ::testing::Values(2, 4, 8), ::testing::Values(1, 16),
                       ::testing::Values(DType::kF32, DType::kF16, DType::kBF16)),
    [](const auto& info) {
      return std::string(dcp_comm_backend_name(std::get<0>(info.param))) + "_n" +
             std::to_string(std::get<1>(info.param)) + "_i" +
             std::to_string(std::get<2>(info.param)) + "_" +
             std::string(dtype_name(std::get<3>(info.param)));
    });

// The seed's warning: the a2a path's send layout ([N, T, H / N, D], head slice first) is not what
// the ag_rs combine reads ([T, H, D]); feeding it there combines the wrong numbers.
TEST(DcpCombine, A2aLayoutFedToAgRsIsWrong) {
  const int world_size = 4;
  const DcpRows rows = DcpRows::random(8, 16, 4, 32, row_lengths(), 99);
  auto ranks = partials(rows, world_size, 1, DType::kF32);
  const int64_t T = rows.num_tokens, H = rows.num_heads, D = rows.head_size, Hs = H / world_size;
  for (auto& rank : ranks) {
    std::vector<char> a2a_layout(rank.partial_out.size());
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        std::memcpy(a2a_layout.data() + (((h / Hs) * T + t) * Hs + h % Hs) * D * sizeof(float),
                    rank.partial_out.data() + (t * H + h) * D * sizeof(float), D * sizeof(float));
      }
    }
    rank.partial_out = a2a_layout;
  }
  for (const Status& s : combine(ranks, rows, DType::kF32, DcpCommBackend::kAgRs)) {
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  EXPECT_GT(max_error(ranks, rows, DType::kF32), 0.05);
}

// One token, N heads (one per rank), head size 2: lse_by_rank[r] is rank r's [H, 1] LSEs and
// out_by_rank[r] fills rank r's whole partial output.
std::vector<Status> combine_handmade(std::vector<std::vector<float>> lse_by_rank,
                                     std::vector<float> out_by_rank, DcpCommBackend backend,
                                     std::vector<RankBuffers>& ranks) {
  const int world_size = static_cast<int>(lse_by_rank.size());
  ranks.assign(world_size, {});
  DcpRows shape{1, world_size, 1, 2, {}, {}, {}, {}, {}};
  for (int r = 0; r < world_size; ++r) {
    ranks[r].partial_lse = lse_by_rank[r];  // [H = N, T = 1]
    ranks[r].partial_out =
        to_dtype(std::vector<float>(world_size * 2, out_by_rank[r]), DType::kF32);
    ranks[r].out.resize(2 * sizeof(float));
    ranks[r].out_lse.resize(1);
  }
  return combine(ranks, shape, DType::kF32, backend);
}

class CombineEdgeTest : public ::testing::TestWithParam<DcpCommBackend> {};

TEST_P(CombineEdgeTest, EmptyRanksAddNothingEvenNaN) {
  std::vector<RankBuffers> ranks;
  // Rank 1 is empty (-inf), rank 2 empty by +inf (FlashAttention 2's empty row), both hold NaN.
  const float l = 0.7f;
  for (const Status& s : combine_handmade({{l, l, l}, {-kInf, -kInf, -kInf}, {kInf, kInf, kInf}},
                                          {3.0f, kNaN, kNaN}, GetParam(), ranks)) {
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  for (const auto& rank : ranks) {
    EXPECT_EQ(load_as_float(rank.out.data(), DType::kF32, 0), 3.0f);
    EXPECT_FLOAT_EQ(rank.out_lse[0], l);
  }
}

TEST_P(CombineEdgeTest, AllEmptyGivesRankZerosOutputAndMinusInf) {
  std::vector<RankBuffers> ranks;
  for (const Status& s :
       combine_handmade({{-kInf, -kInf}, {-kInf, kInf}}, {5.0f, 9.0f}, GetParam(), ranks)) {
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  for (const auto& rank : ranks) {
    EXPECT_EQ(load_as_float(rank.out.data(), DType::kF32, 1), 5.0f);  // merge_attn_states: prefix
    EXPECT_EQ(rank.out_lse[0], -kInf);
  }
}

TEST_P(CombineEdgeTest, NaNPropagates) {
  std::vector<RankBuffers> ranks;
  // Head 0: rank 1's LSE is NaN. Head 1: rank 0's output is NaN and it contributes.
  for (const Status& s :
       combine_handmade({{0.5f, 0.5f}, {kNaN, 0.25f}}, {kNaN, 2.0f}, GetParam(), ranks)) {
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  EXPECT_TRUE(std::isnan(ranks[0].out_lse[0]));
  EXPECT_TRUE(std::isnan(load_as_float(ranks[0].out.data(), DType::kF32, 0)));
  EXPECT_FALSE(std::isnan(ranks[1].out_lse[0]));
  EXPECT_TRUE(std::isnan(load_as_float(ranks[1].out.data(), DType::kF32, 0)));
}

INSTANTIATE_TEST_SUITE_P(Dcp, CombineEdgeTest,
                         ::testing::Values(DcpCommBackend::kAgRs, DcpCommBackend::kA2a),
                         [](const auto& info) {
                           return std::string(dcp_comm_backend_name(info.param));
                         });

TEST(DcpCombine, RefusesBadArgumentsOnEveryRank) {
  auto group = make_in_process_group(2);
  ASSERT_TRUE(group.ok());
  std::vector<float> a(64), b(64), c(64), d(64);
  const Device cpu = Device::cpu();
  const auto results = run_on_ranks(*group, [&](Communicator& comm) {
    return dcp_combine(comm, DcpCommBackend::kAgRs,
                       TensorView(a.data(), DType::kF32, cpu, {2, 3, 4}),
                       TensorView(b.data(), DType::kF32, cpu, {3, 2}),
                       TensorView(c.data(), DType::kF32, cpu, {2, 1, 4}),
                       TensorView(d.data(), DType::kF32, cpu, {1, 2}));
  });
  for (const Status& s : results) {
    EXPECT_EQ(s.message(),
              "dcp_combine_ag_rs: partial_out has 3 heads; must be a multiple of "
              "world_size (2): each rank gets H / N of them");
  }
  const auto wrong_out = run_on_ranks(*group, [&](Communicator& comm) {
    return dcp_combine(comm, DcpCommBackend::kA2a,
                       TensorView(a.data(), DType::kF32, cpu, {2, 4, 4}),
                       TensorView(b.data(), DType::kF32, cpu, {4, 2}),
                       TensorView(c.data(), DType::kF16, cpu, {2, 2, 4}),
                       TensorView(d.data(), DType::kF32, cpu, {2, 2}));
  });
  for (const Status& s : wrong_out) {
    EXPECT_EQ(s.message(), "dcp_combine_a2a: out has dtype f16; allowed: f32");
  }
  const auto on_cuda = run_on_ranks(*group, [&](Communicator& comm) {
    return dcp_combine(comm, DcpCommBackend::kA2a,
                       TensorView(a.data(), DType::kF32, Device::cuda(0), {2, 4, 4}),
                       TensorView(b.data(), DType::kF32, cpu, {4, 2}),
                       TensorView(c.data(), DType::kF32, cpu, {2, 2, 4}),
                       TensorView(d.data(), DType::kF32, cpu, {2, 2}));
  });
  for (const Status& s : on_cuda) {
    EXPECT_EQ(s.message(),
              "dcp_combine_a2a: partial_out is on cuda:0; the communicator's buffers live on cpu "
              "(every buffer must)");
  }
  EXPECT_EQ(parse_dcp_comm_backend("allgather").status().message(),
            "dcp_comm_backend = 'allgather' is not one of: ag_rs, a2a");
  EXPECT_EQ(*parse_dcp_comm_backend("a2a"), DcpCommBackend::kA2a);
  EXPECT_EQ(*parse_dcp_comm_backend("ag_rs"), DcpCommBackend::kAgRs);
}

}  // namespace
}  // namespace pagedattn
