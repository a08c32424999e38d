// The NCCL Communicator on one GPU: a single-rank group (NCCL refuses two ranks on one device) runs
// each collective on device buffers and gives, bit for bit, what the in-process group of one rank
// gives on host buffers; host buffers are refused by name. Skips where libnccl.so.2 cannot load
// (scripts/gpu_run.sh adds PyTorch's NCCL to the library path).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "common/numeric.h"
#include "cuda_test_support.h"
#include "pagedattn/communicator.h"
#include "pagedattn/nccl_communicator.h"

namespace pagedattn::test {
namespace {

using Collective = std::function<Status(Communicator&, const TensorView&, const TensorView&)>;

struct DeviceBytes {
  void* ptr = nullptr;
  explicit DeviceBytes(size_t bytes) { EXPECT_EQ(cudaMalloc(&ptr, bytes), cudaSuccess); }
  ~DeviceBytes() { cudaFree(ptr); }
};

// The collective on one NCCL rank (device buffers) and on one in-process rank (host buffers).
void expect_same_as_in_process(Communicator& nccl, DType dtype, const Collective& run) {
  const int64_t n = 4099;
  const size_t bytes = static_cast<size_t>(n) * dtype_size(dtype);
  std::vector<char> send(bytes), want(bytes), got(bytes);
  for (int64_t i = 0; i < n; ++i) store_from_float(send.data(), dtype, i, 0.37f * (i % 97) - 11.f);

  auto group = make_in_process_group(1);
  ASSERT_TRUE(group.ok()) << group.status().to_string();
  const TensorView host_send(send.data(), dtype, Device::cpu(), {n});
  const TensorView host_recv(want.data(), dtype, Device::cpu(), {n});
  ASSERT_TRUE(run(*(*group)[0], host_send, host_recv).ok());

  DeviceBytes d_send(bytes), d_recv(bytes);
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemcpy(d_send.ptr, send.data(), bytes, cudaMemcpyHostToDevice));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemset(d_recv.ptr, 0xFF, bytes));
  const Status st = run(nccl, TensorView(d_send.ptr, dtype, Device::cuda(0), {n}),
                        TensorView(d_recv.ptr, dtype, Device::cuda(0), {n}));
  ASSERT_TRUE(st.ok()) << st.to_string();
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  PAGEDATTN_EXPECT_CUDA_OK(cudaMemcpy(got.data(), d_recv.ptr, bytes, cudaMemcpyDeviceToHost));
  EXPECT_EQ(std::memcmp(got.data(), want.data(), bytes), 0) << dtype_name(dtype);
}

TEST(NcclCommunicator, OneRankEqualsTheInProcessGroupBitForBit) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  StatusOr<NcclUniqueId> id = make_nccl_unique_id();
  if (!id.ok()) GTEST_SKIP() << "skipped: " << id.status().to_string();
  StatusOr<std::unique_ptr<Communicator>> nccl = make_nccl_communicator(*id, 1, 0, 0);
  ASSERT_TRUE(nccl.ok()) << nccl.status().to_string();
  EXPECT_EQ((*nccl)->world_size(), 1);
  EXPECT_EQ((*nccl)->device(), Device::cuda(0));
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    expect_same_as_in_process(**nccl, dtype, [](Communicator& c, const TensorView& s,
                                                 const TensorView& r) { return c.all_gather(s, r); });
    expect_same_as_in_process(**nccl, dtype, [](Communicator& c, const TensorView& s,
                                                 const TensorView& r) {
      return c.reduce_scatter(s, r);
    });
    expect_same_as_in_process(**nccl, dtype, [](Communicator& c, const TensorView& s,
                                                 const TensorView& r) { return c.all_to_all(s, r); });
  }
  // Host buffers are not the group's device: refused, naming the buffer.
  std::vector<float> host(8);
  const TensorView on_host(host.data(), DType::kF32, Device::cpu(), {8});
  const Status refused = (*nccl)->all_gather(on_host, on_host);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("send"), std::string::npos) << refused.to_string();
}

}  // namespace
}  // namespace pagedattn::test
