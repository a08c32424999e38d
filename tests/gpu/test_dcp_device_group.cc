// The in-process group on device buffers (dcp::make_in_process_group on cuda:0), N ranks on
// threads with a stream each: every collective gives bit for bit what the host group gives on the
// same finite values (NaN encodings may differ: the GPU's conversions give canonical NaNs); a send
// buffer overwritten on its stream right after the call still reaches every reader as it was;
// ranks that disagree all fail, none waits.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/numeric.h"
#include "cuda_test_support.h"
#include "dcp/in_process_group.h"
#include "dcp_gpu_support.h"

namespace pagedattn::test {
namespace {

// Elements of one rank's send buffer for `kind` in a group of `n` ranks, and of its recv buffer.
struct Counts {
  int64_t send, recv;
};
Counts counts(CollectiveKind kind, int n) {
  const int64_t chunk = 1000 + 37;  // not a multiple of any vector width
  switch (kind) {
    case CollectiveKind::kAllGather: return {chunk, n * chunk};
    case CollectiveKind::kReduceScatter: return {n * chunk, chunk};
    case CollectiveKind::kAllToAll: return {n * chunk, n * chunk};
  }
  return {0, 0};
}

Status call(Communicator& comm, CollectiveKind kind, const TensorView& send, const TensorView& recv,
            StreamHandle stream) {
  switch (kind) {
    case CollectiveKind::kAllGather: return comm.all_gather(send, recv, stream);
    case CollectiveKind::kReduceScatter: return comm.reduce_scatter(send, recv, stream);
    case CollectiveKind::kAllToAll: return comm.all_to_all(send, recv, stream);
  }
  return internal_error("unknown collective");
}

// Finite values of `dtype` (ints for i32), different on every rank.
std::vector<char> random_values(DType dtype, int64_t count, uint32_t seed) {
  std::vector<char> bytes(static_cast<size_t>(count) * dtype_size(dtype));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (int64_t i = 0; i < count; ++i) {
    if (dtype == DType::kI32) {
      const int32_t v = static_cast<int32_t>(rng());
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else {
      store_from_float(bytes.data(), dtype, i, normal(rng));
    }
  }
  return bytes;
}

class DcpDeviceGroup : public ::testing::TestWithParam<int> {};

TEST_P(DcpDeviceGroup, EqualsTheHostGroupBitForBit) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const int n = GetParam();
  auto host_group = make_in_process_group(n);
  auto device_group = dcp::make_in_process_group(n, Device::cuda(0));
  ASSERT_TRUE(host_group.ok() && device_group.ok()) << device_group.status().to_string();
  for (const CollectiveKind kind :
       {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll}) {
    for (const DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32}) {
      if (kind == CollectiveKind::kReduceScatter && dtype == DType::kI32) continue;
      const Counts c = counts(kind, n);
      const std::string what =
          std::string(collective_kind_name(kind)) + " " + std::string(dtype_name(dtype));
      std::vector<std::vector<char>> sends(n), host_recvs(n);
      std::vector<DeviceTensor> device_sends, device_recvs;
      for (int r = 0; r < n; ++r) {
        sends[r] = random_values(dtype, c.send, 7 + 31 * r + static_cast<int>(kind));
        host_recvs[r].resize(static_cast<size_t>(c.recv) * dtype_size(dtype));
        auto send = to_device(TensorView(sends[r].data(), dtype, Device::cpu(), {c.send}));
        auto recv = poisoned(dtype, {c.recv});
        ASSERT_TRUE(send.ok() && recv.ok());
        device_sends.push_back(std::move(*send));
        device_recvs.push_back(std::move(*recv));
      }
      for (const Status& s : testing::run_on_ranks(*host_group, [&](Communicator& comm) {
             const int r = comm.rank();
             return call(comm, kind, TensorView(sends[r].data(), dtype, Device::cpu(), {c.send}),
                         TensorView(host_recvs[r].data(), dtype, Device::cpu(), {c.recv}), nullptr);
           })) {
        ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
      }
      for (const Status& s :
           run_on_rank_streams(*device_group, [&](Communicator&comm, cudaStream_t stream) {
             const int r = comm.rank();
             return call(comm, kind, device_sends[r].view, device_recvs[r].view, stream);
           })) {
        ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
      }
      for (int r = 0; r < n; ++r) {
        StatusOr<testing::HostTensor> got = to_host(device_recvs[r].view);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        EXPECT_EQ(std::memcmp(got->view().data(), host_recvs[r].data(), host_recvs[r].size()), 0)
            << what << ", rank " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DcpDeviceGroup, ::testing::Values(2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "_ranks"; });

// The last rank zeroes its send buffer on its stream right after each call. Every rank copies the
// ranks' chunks in rank order, so the last rank's chunk is every reader's last copy, running while
// the last rank's own copies end: without the group's ordering (its stream waits for every rank's
// reads) the zeroing would race with those copies.
TEST(DcpDeviceGroupOrdering, SendBufferOverwrittenAfterTheCallStillReachesEveryReader) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const int n = 4, last = n - 1;
  const int64_t count = int64_t{8} << 20;  // floats per chunk: copies long enough to overlap
  auto group = dcp::make_in_process_group(n, Device::cuda(0));
  ASSERT_TRUE(group.ok()) << group.status().to_string();
  for (const CollectiveKind kind : {CollectiveKind::kAllGather, CollectiveKind::kAllToAll}) {
    const int64_t send_count = kind == CollectiveKind::kAllGather ? count : n * count;
    std::vector<std::vector<char>> sends(n);
    std::vector<DeviceTensor> device_sends, device_recvs;
    for (int r = 0; r < n; ++r) {
      sends[r] = random_values(DType::kF32, send_count, 100 + r);
      auto send = to_device(TensorView(sends[r].data(), DType::kF32, Device::cpu(), {send_count}));
      auto recv = poisoned(DType::kF32, {n * count});
      ASSERT_TRUE(send.ok() && recv.ok());
      device_sends.push_back(std::move(*send));
      device_recvs.push_back(std::move(*recv));
    }
    for (const Status& s :
         run_on_rank_streams(*group, [&](Communicator&comm, cudaStream_t stream) -> Status {
           const int r = comm.rank();
           PAGEDATTN_RETURN_IF_ERROR(
               call(comm, kind, device_sends[r].view, device_recvs[r].view, stream));
           if (r != last) return ok_status();
           return runtime::cuda_status(cudaMemsetAsync(device_sends[r].view.data(), 0,
                                                       device_sends[r].view.nbytes(), stream),
                                       "overwriting the last rank's send buffer");
         })) {
      ASSERT_TRUE(s.ok()) << s.to_string();
    }
    // Every rank's last chunk came from the last rank: its values before they were zeroed.
    for (int r = 0; r < n; ++r) {
      StatusOr<testing::HostTensor> got = to_host(device_recvs[r].view);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      const char* from_last =
          sends[last].data() + (kind == CollectiveKind::kAllGather ? 0 : r * count * 4);
      EXPECT_EQ(
          std::memcmp(got->view().data_as<const char>() + last * count * 4, from_last, count * 4),
          0)
          << collective_kind_name(kind) << ", rank " << r;
    }
  }
}

TEST(DcpDeviceGroupOrdering, RanksThatDisagreeAllFail) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  auto group = dcp::make_in_process_group(2, Device::cuda(0));
  ASSERT_TRUE(group.ok()) << group.status().to_string();
  auto a = poisoned(DType::kF32, {64});
  auto b = poisoned(DType::kF32, {128});
  auto c = poisoned(DType::kF32, {128});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  // Each call is valid alone; together they are two different collectives.
  const std::vector<Status> results =
      run_on_rank_streams(*group, [&](Communicator& comm, cudaStream_t stream) {
        return comm.rank() == 0 ? comm.all_gather(a->view, b->view, stream)
                                : comm.all_to_all(b->view, c->view, stream);
      });
  for (const Status& s : results) {
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("collective refused"), std::string::npos) << s.to_string();
  }
  // Host buffers are not the group's device: refused by name, on every rank alike.
  std::vector<float> host(64);
  const std::vector<Status> on_host =
      run_on_rank_streams(*group, [&](Communicator& comm, cudaStream_t stream) {
        return comm.all_gather(TensorView(host.data(), DType::kF32, Device::cpu(), {32}), b->view,
                               stream);
      });
  for (const Status& s : on_host) {
    EXPECT_NE(s.message().find("send"), std::string::npos) << s.to_string();
  }
}

}  // namespace
}  // namespace pagedattn::test
