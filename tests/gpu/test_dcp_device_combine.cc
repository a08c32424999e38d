// dcp_combine on device buffers (the device in-process group, a stream per rank) against the host
// combine over the same partials, both paths, N in {2, 4, 8}, f32/bf16/f16, with strided partials
// and LSEs. The two run the same arithmetic operation for operation except expf and logf, which
// CUDA and the C library may round an ulp apart; the weights then differ by a few float ulps, and
// a value may round to the neighbouring element of its dtype. Hence the stated tolerance: LSEs
// within 1e-6 (1 + |lse|); outputs (|values| <= 1) within two ulps of 1 in their dtype (ag_rs
// rounds each rank's term and the sum, a2a the sum). Non-finite results (NaN LSEs, empty rows,
// empty ranks holding NaN) must match exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "common/numeric.h"
#include "cuda_test_support.h"
#include "dcp/in_process_group.h"
#include "dcp_gpu_support.h"
#include "pagedattn/dcp_combine.h"
#include "unit/dcp_partials.h"
#include "unit/dcp_printers.h"

namespace pagedattn::test {
namespace {

using testing::DcpRows;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kPad = 3;  // extra heads / tokens in the strided device views

// One rank's partials ([T, H, D] in floats, [H, T]) and both combines' results.
struct RankCase {
  std::vector<float> out, lse;
  std::vector<float> host_out, host_lse, device_out, device_lse;  // [T, H / N, D], [H / N, T]
};

struct Shape {
  int64_t tokens, heads, dim;
};

double output_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return 2.0 * 0x1p-7;
    case DType::kF16: return 2.0 * 0x1p-10;
    default: return 2e-6;
  }
}

std::vector<float> as_floats(const TensorView& t) {
  std::vector<float> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = load_as_float(t.data(), t.dtype(), i);
  return v;
}

// Runs the combine of `path` over every rank's partials on the host group and on the device group.
void combine_both(std::vector<RankCase>& ranks, Shape s, DType dtype, DcpCommBackend path) {
  const int n = static_cast<int>(ranks.size());
  const int64_t t = s.tokens, h = s.heads, d = s.dim, hs = h / n;
  auto host_group = make_in_process_group(n);
  auto device_group = dcp::make_in_process_group(n, Device::cuda(0));
  ASSERT_TRUE(host_group.ok() && device_group.ok()) << device_group.status().to_string();

  std::vector<std::vector<char>> host_in(n), host_out(n);
  for (int r = 0; r < n; ++r) {
    host_in[r].resize(ranks[r].out.size() * dtype_size(dtype));
    for (size_t i = 0; i < ranks[r].out.size(); ++i) {
      store_from_float(host_in[r].data(), dtype, i, ranks[r].out[i]);
    }
    host_out[r].resize(t * hs * d * dtype_size(dtype));
    ranks[r].host_lse.assign(hs * t, 0.0f);
  }
  for (const Status& st : testing::run_on_ranks(*host_group, [&](Communicator& comm) {
         const int r = comm.rank();
         const Device cpu = Device::cpu();
         return dcp_combine(comm, path, TensorView(host_in[r].data(), dtype, cpu, {t, h, d}),
                            TensorView(ranks[r].lse.data(), DType::kF32, cpu, {h, t}),
                            TensorView(host_out[r].data(), dtype, cpu, {t, hs, d}),
                            TensorView(ranks[r].host_lse.data(), DType::kF32, cpu, {hs, t}));
       })) {
    ASSERT_TRUE(st.ok()) << st.to_string();
  }

  // Device partials strided: kPad more heads per token, kPad more tokens per LSE row.
  std::vector<DeviceTensor> out_in, lse_in, out, lse;
  for (int r = 0; r < n; ++r) {
    std::vector<char> padded((t * (h + kPad) * d) * dtype_size(dtype));
    std::vector<float> padded_lse(h * (t + kPad), kNaN);
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < h; ++j) {
        for (int64_t k = 0; k < d; ++k) {
          store_from_float(padded.data(), dtype, (i * (h + kPad) + j) * d + k,
                           ranks[r].out[(i * h + j) * d + k]);
        }
        padded_lse[j * (t + kPad) + i] = ranks[r].lse[j * t + i];
      }
    }
    auto a = to_device(TensorView(padded.data(), dtype, Device::cpu(), {t, h + kPad, d}));
    auto b = to_device(TensorView(padded_lse.data(), DType::kF32, Device::cpu(), {h, t + kPad}));
    auto c = poisoned(dtype, {t, hs, d});
    auto e = poisoned(DType::kF32, {hs, t + kPad});
    ASSERT_TRUE(a.ok() && b.ok() && c.ok() && e.ok());
    out_in.push_back(std::move(*a));
    lse_in.push_back(std::move(*b));
    out.push_back(std::move(*c));
    lse.push_back(std::move(*e));
  }
  const auto strided = [](const TensorView& whole, std::initializer_list<int64_t> shape) {
    std::vector<int64_t> strides(whole.strides().begin(), whole.strides().end());
    return TensorView(whole.data(), whole.dtype(), whole.device(), std::vector<int64_t>(shape),
                      strides);
  };
  for (const Status& st :
       run_on_rank_streams(*device_group, [&](Communicator&comm, cudaStream_t stream) {
         const int r = comm.rank();
         return dcp_combine(comm, path, strided(out_in[r].view, {t, h, d}),
                            strided(lse_in[r].view, {h, t}), out[r].view,
                            strided(lse[r].view, {hs, t}), stream);
       })) {
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  for (int r = 0; r < n; ++r) {
    ranks[r].host_out = as_floats(TensorView(host_out[r].data(), dtype, Device::cpu(), {t, hs, d}));
    StatusOr<testing::HostTensor> got_out = to_host(out[r].view);
    StatusOr<testing::HostTensor> got_lse = to_host(lse[r].view);
    ASSERT_TRUE(got_out.ok() && got_lse.ok());
    ranks[r].device_out = as_floats(got_out->view());
    ranks[r].device_lse.clear();
    for (int64_t j = 0; j < hs; ++j) {
      for (int64_t i = 0; i < t; ++i) {
        ranks[r].device_lse.push_back(got_lse->view().data_as<const float>()[j * (t + kPad) + i]);
      }
    }
  }
}

// `what` names the buffer in messages and in the XML property counting the elements whose bits
// differ (for the record: how often the ulp-apart expf/logf show).
void expect_close(const std::vector<float>& device, const std::vector<float>& host,
                  double tolerance, bool relative, const std::string& what) {
  ASSERT_EQ(device.size(), host.size()) << what;
  int64_t bit_different = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    bit_different += device[i] != host[i] ? 1 : 0;
    if (std::isnan(host[i]) || std::isinf(host[i])) {
      EXPECT_TRUE(std::isnan(host[i]) ? std::isnan(device[i]) : device[i] == host[i])
          << what << " element " << i << ": device " << device[i] << ", host " << host[i];
      continue;
    }
    const double bound = relative ? tolerance * (1.0 + std::fabs(host[i])) : tolerance;
    EXPECT_NEAR(device[i], host[i], bound) << what << " element " << i;
  }
  ::testing::Test::RecordProperty(what + "_not_bit_identical", static_cast<int>(bit_different));
}

void expect_device_equals_host(const std::vector<RankCase>& ranks, DType dtype) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::string rank = "rank" + std::to_string(r);
    expect_close(ranks[r].device_lse, ranks[r].host_lse, 1e-6, true, rank + "_lse");
    expect_close(ranks[r].device_out, ranks[r].host_out, output_tolerance(dtype), false,
                 rank + "_out");
  }
}

// Row lengths: empty, shorter than one turn of the ranks, and long.
std::vector<int64_t> row_lengths() {
  return {0, 1, 5, 17, 130, 301, 64, 999};
}

class DcpDeviceCombine : public ::testing::TestWithParam<std::tuple<DcpCommBackend, int, DType>> {};

TEST_P(DcpDeviceCombine, EqualsTheHostCombine) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const auto [path, n, dtype] = GetParam();
  const DcpRows rows = DcpRows::random(8, 16, 4, 32, row_lengths(), 52 + n);
  std::vector<RankCase> ranks(n);
  for (int r = 0; r < n; ++r) {
    rows.attend([&](int64_t j) { return dcp_owner_rank(j, n, 1) == r; }, ranks[r].out,
                ranks[r].lse);
    // An empty rank's output is unused memory where the row has keys elsewhere.
    for (int64_t t = 0; t < rows.num_tokens; ++t) {
      for (int64_t h = 0; h < rows.num_heads; ++h) {
        if (ranks[r].lse[h * rows.num_tokens + t] != -kInf || rows.lengths[t] == 0) continue;
        for (int64_t d = 0; d < rows.head_size; ++d) {
          ranks[r].out[(t * rows.num_heads + h) * rows.head_size + d] = kNaN;
        }
      }
    }
  }
  combine_both(ranks, {rows.num_tokens, rows.num_heads, rows.head_size}, dtype, path);
  expect_device_equals_host(ranks, dtype);
}

INSTANTIATE_TEST_SUITE_P(
    Grid, DcpDeviceCombine,
    ::testing::Combine(::testing::Values(DcpCommBackend::kAgRs, DcpCommBackend::kA2a),
                       ::testing::Values(2, 4, 8),
                       ::testing::Values(DType::kF32, DType::kBF16, DType::kF16)),
    [](const auto& info) {
      return std::string(dcp_comm_backend_name(std::get<0>(info.param))) + "_n" +
             std::to_string(std::get<1>(info.param)) + "_" +
             std::string(dtype_name(std::get<2>(info.param)));
    });

// One token, N heads (one per rank), head size 2, as the host tests build them: lses[r] is rank
// r's [H, 1] LSEs, value[r] fills its whole output.
std::vector<RankCase> handmade(std::vector<std::vector<float>> lses, std::vector<float> value) {
  std::vector<RankCase> ranks(lses.size());
  for (size_t r = 0; r < lses.size(); ++r) {
    ranks[r].lse = lses[r];
    ranks[r].out.assign(lses.size() * 2, value[r]);
  }
  return ranks;
}

class DcpDeviceCombineEdges : public ::testing::TestWithParam<DcpCommBackend> {};

TEST_P(DcpDeviceCombineEdges, EmptyRanksAllEmptyRowsAndNaNAsOnTheHost) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const float l = 0.7f;
  // Empty ranks by -inf and +inf holding NaN; every rank empty; a NaN LSE and a NaN output.
  for (auto [lses, values] :
       {std::pair{
            std::vector<std::vector<float>>{{l, l, l}, {-kInf, -kInf, -kInf}, {kInf, kInf, kInf}},
            std::vector<float>{3.0f, kNaN, kNaN}},
        std::pair{std::vector<std::vector<float>>{{-kInf, -kInf}, {-kInf, kInf}},
                  std::vector<float>{5.0f, 9.0f}},
        std::pair{std::vector<std::vector<float>>{{0.5f, 0.5f}, {kNaN, 0.25f}},
                  std::vector<float>{kNaN, 2.0f}}}) {
    std::vector<RankCase> ranks = handmade(lses, values);
    const int64_t n = static_cast<int64_t>(ranks.size());
    combine_both(ranks, {1, n, 2}, DType::kF32, GetParam());
    expect_device_equals_host(ranks, DType::kF32);
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, DcpDeviceCombineEdges,
                         ::testing::Values(DcpCommBackend::kAgRs, DcpCommBackend::kA2a),
                         [](const auto& info) {
                           return std::string(dcp_comm_backend_name(info.param));
                         });

}  // namespace
}  // namespace pagedattn::test
