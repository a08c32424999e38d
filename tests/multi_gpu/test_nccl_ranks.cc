// One rank of an NCCL group of N processes, one GPU each (scripts/dcp_multi_gpu.sh starts them):
// every collective on device buffers gives, bit for bit, what N in-process ranks give on host
// buffers. Each process runs the N in-process ranks itself to know what its own rank must receive.
// The values are small integers, so that a sum in any order is exact. Skips unless the script
// started it (rank_group.h).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/numeric.h"
#include "pagedattn/communicator.h"
#include "pagedattn/nccl_communicator.h"
#include "rank_group.h"
#include "unit/dcp_ranks.h"

namespace pagedattn::test {
namespace {

// Rank r's send buffer: n small integers that differ by rank, in `dtype`.
std::vector<char> send_values(int rank, int64_t n, DType dtype) {
  std::vector<char> bytes(static_cast<size_t>(n) * dtype_size(dtype));
  for (int64_t i = 0; i < n; ++i) {
    const float value = static_cast<float>((i * 7 + rank * 13) % 61 - 30);
    if (dtype == DType::kI32) {
      reinterpret_cast<int32_t*>(bytes.data())[i] = static_cast<int32_t>(value);
    } else {
      store_from_float(bytes.data(), dtype, i, value);
    }
  }
  return bytes;
}

using Collective = std::function<Status(Communicator&, const TensorView&, const TensorView&)>;

// What `rank` receives when every rank of an in-process group of `world_size` runs `run`.
std::vector<char> in_process_result(int world_size, int rank, DType dtype, int64_t send_n,
                                    int64_t recv_n, const Collective& run) {
  auto group = make_in_process_group(world_size);
  EXPECT_TRUE(group.ok()) << group.status().to_string();
  std::vector<std::vector<char>> sends, recvs;
  for (int r = 0; r < world_size; ++r) {
    sends.push_back(send_values(r, send_n, dtype));
    recvs.emplace_back(static_cast<size_t>(recv_n) * dtype_size(dtype));
  }
  for (const Status& st : testing::run_on_ranks(*group, [&](Communicator& c) {
         return run(c, TensorView(sends[c.rank()].data(), dtype, Device::cpu(), {send_n}),
                    TensorView(recvs[c.rank()].data(), dtype, Device::cpu(), {recv_n}));
       })) {
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  return recvs[rank];
}

void expect_rank_matches(Communicator& nccl, const RankEnv& env, DType dtype, int64_t send_n,
                         int64_t recv_n, const Collective& run, const char* what) {
  const std::vector<char> want =
      in_process_result(env.world_size, env.rank, dtype, send_n, recv_n, run);
  const std::vector<char> send = send_values(env.rank, send_n, dtype);
  void* d_send = nullptr;
  void* d_recv = nullptr;
  ASSERT_EQ(cudaMalloc(&d_send, send.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_recv, want.size()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_send, send.data(), send.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_recv, 0xFF, want.size()), cudaSuccess);
  const Device device = Device::cuda(0);
  const Status st = run(nccl, TensorView(d_send, dtype, device, {send_n}),
                        TensorView(d_recv, dtype, device, {recv_n}));
  ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<char> got(want.size());
  ASSERT_EQ(cudaMemcpy(got.data(), d_recv, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d_send);
  cudaFree(d_recv);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0)
      << what << " " << dtype_name(dtype) << " on rank " << env.rank << " of " << env.world_size;
}

TEST(NcclRanks, EveryCollectiveMatchesTheInProcessGroupBitForBit) {
  const RankEnv env = rank_env();
  if (env.rank < 0) GTEST_SKIP() << "skipped: one rank of a group; run scripts/dcp_multi_gpu.sh";
  auto nccl = join_rank_group(env, "collectives");
  ASSERT_TRUE(nccl.ok()) << nccl.status().to_string();
  ASSERT_EQ((*nccl)->rank(), env.rank);
  ASSERT_EQ((*nccl)->world_size(), env.world_size);

  const int64_t n = 4099;  // per rank; odd, so no chunk is a multiple of a vector width
  const int64_t world = env.world_size;
  const auto all_gather = [](Communicator& c, const TensorView& s, const TensorView& r) {
    return c.all_gather(s, r);
  };
  const auto reduce_scatter = [](Communicator& c, const TensorView& s, const TensorView& r) {
    return c.reduce_scatter(s, r);
  };
  const auto all_to_all = [](Communicator& c, const TensorView& s, const TensorView& r) {
    return c.all_to_all(s, r);
  };
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    expect_rank_matches(**nccl, env, dtype, n, world * n, all_gather, "all_gather");
    expect_rank_matches(**nccl, env, dtype, world * n, n, reduce_scatter, "reduce_scatter");
    expect_rank_matches(**nccl, env, dtype, world * n, world * n, all_to_all, "all_to_all");
  }
  expect_rank_matches(**nccl, env, DType::kI32, n, world * n, all_gather, "all_gather");
}

}  // namespace
}  // namespace pagedattn::test
