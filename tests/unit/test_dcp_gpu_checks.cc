// The GPU backends' DCP checks are host code (backends/gpu/dcp_checks.h, dcp/combine_checks.h):
// they read devices, shapes and the group's rank and size, never device memory, so they run here
// on views that only claim to live on cuda:0, with a group that moves no data. Each refusal names
// the parameter, its value and what is allowed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/gpu/dcp_checks.h"
#include "dcp/combine_checks.h"
#include "pagedattn/communicator.h"
#include "pagedattn/config.h"

namespace pagedattn::gpu {
namespace {

const Device kGpu = Device::cuda(0);

// A group of `world_size` ranks whose buffers live on `device`; its collectives are never called.
class ClaimedGroup final : public Communicator {
 public:
  ClaimedGroup(int rank, int world_size, Device device)
      : rank_(rank), world_size_(world_size), device_(device) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  Device device() const override { return device_; }
  Status all_gather(const TensorView&, const TensorView&, StreamHandle) override { return moves(); }
  Status reduce_scatter(const TensorView&, const TensorView&, StreamHandle) override {
    return moves();
  }
  Status all_to_all(const TensorView&, const TensorView&, StreamHandle) override { return moves(); }

 private:
  static Status moves() { return internal_error("ClaimedGroup moves no data"); }
  int rank_, world_size_;
  Device device_;
};

void expect_refused(const Status& s, StatusCode code, const std::string& words) {
  ASSERT_FALSE(s.ok()) << "expected a refusal naming '" << words << "'";
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
}

// Rank 0's layer of a group of 2: 2 query heads, 2 KV heads, head size 128, bf16, on cuda:0.
AttentionImplParams layer(Communicator* group) {
  AttentionImplParams p;
  p.num_heads = 2;
  p.num_kv_heads = 2;
  p.head_size = 128;
  p.dtype = DType::kBF16;
  p.device = kGpu;
  p.dcp_group = group;
  return p;
}

TEST(DcpGpuChecks, ImplNeedsTheGroupOnTheLayersDeviceAndRefusesWhatDcpCannotServe) {
  ClaimedGroup on_gpu(0, 2, kGpu), on_host(0, 2, Device::cpu()), elsewhere(0, 2, Device::cuda(1));
  EXPECT_TRUE(check_dcp_impl_params("FLASH_ATTN", layer(&on_gpu)).ok());
  EXPECT_TRUE(check_dcp_impl_params("FLASH_ATTN", layer(nullptr)).ok());
  expect_refused(check_dcp_impl_params("FLASH_ATTN", layer(&on_host)), StatusCode::kInvalidArgument,
                 "FLASH_ATTN impl: dcp_group's buffers live on cpu; the layer runs on cuda:0 "
                 "(allowed: a communicator on the layer's device");
  expect_refused(check_dcp_impl_params("FLASHINFER", layer(&elsewhere)),
                 StatusCode::kInvalidArgument,
                 "FLASHINFER impl: dcp_group's buffers live on cuda:1; the layer runs on cuda:0");
  AttentionImplParams p = layer(&on_gpu);
  p.sliding_window = SlidingWindow{64, 0};  // the context pass cuts it at absolute positions
  EXPECT_TRUE(check_dcp_impl_params("FLASH_ATTN", p).ok());
  p = layer(&on_gpu);
  p.kernel_generation = 3;
  expect_refused(check_dcp_impl_params("FLASH_ATTN", p), StatusCode::kInvalidArgument,
                 "kernel_generation = 3 with a dcp_group of world size 2");
  p = layer(&on_gpu);
  p.alibi_slopes = {0.5f, 0.25f};
  expect_refused(check_dcp_impl_params("FLASH_ATTN", p), StatusCode::kInvalidArgument,
                 "FLASH_ATTN impl: alibi_slopes given with a dcp_group of world size 2");
}

// A sharded step of 5 tokens as rank 0 of 2 built it.
DcpStep sharded_step() {
  DcpStep dcp;
  dcp.enabled = true;
  dcp.shard = DcpShard{2, 0, 1};
  dcp.num_tokens = 5;
  return dcp;
}

struct ForwardViews {
  std::vector<char> bytes = std::vector<char>(1);  // never read: the views only claim cuda:0
  TensorView query{bytes.data(), DType::kBF16, kGpu, {5, 2, 128}};
  TensorView key{bytes.data(), DType::kBF16, kGpu, {5, 2, 128}};
  TensorView value{bytes.data(), DType::kBF16, kGpu, {5, 2, 128}};
};

TEST(DcpGpuChecks, ForwardNeedsTheStepAndTheGroupToAgree) {
  ClaimedGroup rank0(0, 2, kGpu), rank1(1, 2, kGpu), of4(0, 4, kGpu);
  const StepInfo step{0, {}, 32, 2, 5};
  const ForwardViews v;
  const DcpStep dcp = sharded_step();
  const auto check = [&](const DcpStep& d, Communicator* group, bool capture) {
    return check_dcp_forward("FLASH_ATTN", d, step, capture, layer(group), v.query, v.key, v.value);
  };
  EXPECT_TRUE(check(dcp, &rank0, false).ok());
  expect_refused(check(dcp, nullptr, false), StatusCode::kInvalidArgument,
                 "FLASH_ATTN forward: metadata is dcp_rank 0 of dcp_world_size 2 but the layer "
                 "has no dcp_group");
  expect_refused(
      check(DcpStep{}, &rank0, false), StatusCode::kInvalidArgument,
      "metadata is not sharded (dcp_world_size 1) but the layer's dcp_group has 2 ranks");
  expect_refused(check(dcp, &rank1, false), StatusCode::kInvalidArgument,
                 "metadata is dcp_rank 0 of dcp_world_size 2; the layer's dcp_group is rank 1 of "
                 "2 (they must agree)");
  expect_refused(check(dcp, &of4, false), StatusCode::kInvalidArgument,
                 "the layer's dcp_group is rank 0 of 4");
  expect_refused(check(dcp, &rank0, true), StatusCode::kUnimplemented,
                 "metadata built for CUDA-graph capture with dcp_world_size = 2: a sharded step's "
                 "collectives are sized by its real token count");
}

TEST(DcpGpuChecks, ForwardNeedsPackedQueryHeadsAndTheNewTokens) {
  ClaimedGroup rank0(0, 2, kGpu);
  const StepInfo step{0, {}, 32, 2, 5};
  ForwardViews v;
  const int64_t shape[] = {5, 2, 128}, padded[] = {512, 256, 1};
  const TensorView spread(v.bytes.data(), DType::kBF16, kGpu, shape, padded);
  expect_refused(check_dcp_forward("FLASH_ATTN", sharded_step(), step, false, layer(&rank0), spread,
                                   v.key, v.value),
                 StatusCode::kInvalidArgument,
                 "under DCP its heads must be packed (head stride 128)");
  const TensorView short_key(v.bytes.data(), DType::kBF16, kGpu, {4, 2, 128});
  expect_refused(check_dcp_forward("FLASH_ATTN", sharded_step(), step, false, layer(&rank0),
                                   v.query, short_key, v.value),
                 StatusCode::kInvalidArgument, "key is bf16[4, 2, 128]");
}

TEST(DcpGpuChecks, TheCombineRunsWhereTheGroupsBuffersLive) {
  ClaimedGroup on_gpu(0, 2, kGpu);
  std::vector<char> bytes(1);
  const auto view = [&](DType dtype, std::initializer_list<int64_t> shape) {
    return TensorView(bytes.data(), dtype, kGpu, shape);
  };
  const StatusOr<dcp::CombineShape> shape = dcp::check_combine(
      "dcp_combine_ag_rs", on_gpu, view(DType::kBF16, {3, 4, 128}), view(DType::kF32, {4, 3}),
      view(DType::kBF16, {3, 2, 128}), view(DType::kF32, {2, 3}), nullptr);
  if (PAGEDATTN_WITH_CUDA) {
    ASSERT_TRUE(shape.ok()) << shape.status().to_string();
    EXPECT_EQ(shape->heads_per_rank, 2);
  } else {
    expect_refused(shape.status(), StatusCode::kUnimplemented,
                   "dcp_combine_ag_rs: the communicator's buffers live on cuda:0; this build has "
                   "no CUDA support (allowed: a host communicator)");
  }
  const TensorView on_host(bytes.data(), DType::kF32, Device::cpu(), {4, 3});
  expect_refused(
      dcp::check_combine("dcp_combine_a2a", on_gpu, view(DType::kBF16, {3, 4, 128}), on_host,
                         view(DType::kBF16, {3, 2, 128}), view(DType::kF32, {2, 3}), nullptr)
          .status(),
      PAGEDATTN_WITH_CUDA ? StatusCode::kInvalidArgument : StatusCode::kUnimplemented,
      PAGEDATTN_WITH_CUDA
          ? "dcp_combine_a2a: partial_lse is on cpu; the communicator's buffers live "
            "on cuda:0 (every buffer must)"
          : "this build has no CUDA support");
}

}  // namespace
}  // namespace pagedattn::gpu
