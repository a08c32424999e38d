// The in-process Communicator: each collective against its definition (communicator.h), many
// collectives in a row, and the refusals (bad arguments, ranks that disagree) on every rank.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/numeric.h"
#include "pagedattn/communicator.h"
#include "unit/dcp_printers.h"
#include "unit/dcp_ranks.h"

namespace pagedattn {
namespace {

using testing::run_on_ranks;

std::vector<std::unique_ptr<Communicator>> group(int world_size) {
  auto ranks = make_in_process_group(world_size);
  EXPECT_TRUE(ranks.ok()) << ranks.status().to_string();
  return std::move(ranks).value();
}

// Small integers distinct per rank, that bf16 holds exactly even summed over 8 ranks (< 256).
float value_of(int rank, int64_t index) {
  return static_cast<float>(rank * 4 + index % 4);
}

// Bytes for `count` elements of `dtype`, filled with value_of(rank, i).
std::vector<char> filled(DType dtype, int rank, int64_t count) {
  std::vector<char> bytes(count * dtype_size(dtype));
  for (int64_t i = 0; i < count; ++i) store_from_float(bytes.data(), dtype, i, value_of(rank, i));
  return bytes;
}

TensorView view(std::vector<char>& bytes, DType dtype) {
  return TensorView(bytes.data(), dtype, Device::cpu(),
                    {static_cast<int64_t>(bytes.size() / dtype_size(dtype))});
}

class CollectiveTest : public ::testing::TestWithParam<std::tuple<int, DType>> {};

TEST_P(CollectiveTest, AllGatherPutsRankChunksInRankOrder) {
  const int world_size =
      std::get<0>(GetParam());  // named, not bound: clang 14 cannot capture bindings
  const DType dtype = std::get<1>(GetParam());
  const int64_t n = 37;
  auto ranks = group(world_size);
  std::vector<std::vector<char>> recv(world_size);
  const auto results = run_on_ranks(ranks, [&](Communicator& c) {
    auto send = filled(dtype, c.rank(), n);
    recv[c.rank()].resize(world_size * n * dtype_size(dtype));
    return c.all_gather(view(send, dtype), view(recv[c.rank()], dtype));
  });
  for (int r = 0; r < world_size; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].to_string();
    for (int s = 0; s < world_size; ++s) {
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(load_as_float(recv[r].data(), dtype, s * n + i), value_of(s, i));
      }
    }
  }
}

TEST_P(CollectiveTest, ReduceScatterSumsEachRanksChunk) {
  const int world_size =
      std::get<0>(GetParam());  // named, not bound: clang 14 cannot capture bindings
  const DType dtype = std::get<1>(GetParam());
  const int64_t n = 29;
  auto ranks = group(world_size);
  std::vector<std::vector<char>> recv(world_size);
  const auto results = run_on_ranks(ranks, [&](Communicator& c) {
    auto send = filled(dtype, c.rank(), world_size * n);
    recv[c.rank()].resize(n * dtype_size(dtype));
    return c.reduce_scatter(view(send, dtype), view(recv[c.rank()], dtype));
  });
  for (int r = 0; r < world_size; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].to_string();
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (int s = 0; s < world_size; ++s) sum += value_of(s, r * n + i);
      ASSERT_EQ(load_as_float(recv[r].data(), dtype, i), sum) << "rank " << r << " element " << i;
    }
  }
}

TEST_P(CollectiveTest, AllToAllSwapsChunks) {
  const int world_size =
      std::get<0>(GetParam());  // named, not bound: clang 14 cannot capture bindings
  const DType dtype = std::get<1>(GetParam());
  const int64_t chunk = 13;
  auto ranks = group(world_size);
  std::vector<std::vector<char>> recv(world_size);
  const auto results = run_on_ranks(ranks, [&](Communicator& c) {
    auto send = filled(dtype, c.rank(), world_size * chunk);
    recv[c.rank()].resize(world_size * chunk * dtype_size(dtype));
    return c.all_to_all(view(send, dtype), view(recv[c.rank()], dtype));
  });
  for (int r = 0; r < world_size; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].to_string();
    for (int s = 0; s < world_size; ++s) {
      for (int64_t i = 0; i < chunk; ++i) {
        ASSERT_EQ(load_as_float(recv[r].data(), dtype, s * chunk + i), value_of(s, r * chunk + i));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dcp, CollectiveTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values(DType::kF32, DType::kF16,
                                                              DType::kBF16)),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

TEST(DcpCommunicator, ConsecutiveCollectivesDoNotMix) {
  // Ranks race ahead into the next collective while others still read this one's buffers: the
  // send buffer is rewritten right after each call, so a late reader would see the wrong round.
  const int world_size = 4;
  const int rounds = 200;
  auto ranks = group(world_size);
  const auto results = run_on_ranks(ranks, [&](Communicator& c) -> Status {
    std::vector<int32_t> send(3);
    std::vector<int32_t> recv(3 * world_size);
    for (int round = 0; round < rounds; ++round) {
      for (int i = 0; i < 3; ++i) send[i] = round * 1000 + c.rank() * 10 + i;
      PAGEDATTN_RETURN_IF_ERROR(
          c.all_gather(TensorView(send.data(), DType::kI32, Device::cpu(), {3}),
                       TensorView(recv.data(), DType::kI32, Device::cpu(), {3 * world_size})));
      for (int s = 0; s < world_size; ++s) {
        for (int i = 0; i < 3; ++i) {
          if (recv[s * 3 + i] != round * 1000 + s * 10 + i) {
            return internal_error("round " + std::to_string(round) + " saw another round's data");
          }
        }
      }
    }
    return ok_status();
  });
  for (const auto& status : results) EXPECT_TRUE(status.ok()) << status.to_string();
}

TEST(DcpCommunicator, RanksCallingDifferentCollectivesAllGetAnError) {
  const int world_size = 3;
  auto ranks = group(world_size);
  const auto results = run_on_ranks(ranks, [&](Communicator& c) {
    std::vector<float> send(world_size * 2, 1.0f);
    std::vector<float> recv(world_size * 2);
    const TensorView s(send.data(), DType::kF32, Device::cpu(), {world_size * 2});
    const TensorView r(recv.data(), DType::kF32, Device::cpu(), {world_size * 2});
    return c.rank() == 1 ? c.all_to_all(s, r) : c.all_gather(s.slice0(0, 2).value(), r);
  });
  for (int r = 0; r < world_size; ++r) {
    ASSERT_FALSE(results[r].ok()) << "rank " << r;
    EXPECT_NE(results[r].message().find("ranks disagree"), std::string::npos)
        << results[r].message();
    EXPECT_NE(results[r].message().find("all_to_all"), std::string::npos) << results[r].message();
  }
  // The group is still usable afterwards.
  const auto next = run_on_ranks(ranks, [&](Communicator& c) {
    std::vector<float> send(1, 1.0f);
    std::vector<float> recv(world_size);
    return c.all_gather(TensorView(send.data(), DType::kF32, Device::cpu(), {1}),
                        TensorView(recv.data(), DType::kF32, Device::cpu(), {world_size}));
  });
  for (const auto& status : next) EXPECT_TRUE(status.ok()) << status.to_string();
}

TEST(DcpCommunicator, OneRanksBadArgumentFailsEveryRank) {
  const int world_size = 4;
  auto ranks = group(world_size);
  const auto results = run_on_ranks(ranks, [&](Communicator& c) {
    std::vector<float> send(2, 1.0f);
    std::vector<float> recv(c.rank() == 2 ? 7 : 2 * world_size);  // rank 2 sized it wrong
    return c.all_gather(
        TensorView(send.data(), DType::kF32, Device::cpu(), {2}),
        TensorView(recv.data(), DType::kF32, Device::cpu(), {static_cast<int64_t>(recv.size())}));
  });
  EXPECT_EQ(results[2].message(),
            "all_gather: recv has 7 elements; must be world_size (4) * send's 2 = 8");
  for (int r : {0, 1, 3}) {
    EXPECT_NE(results[r].message().find("rank 2's call is invalid"), std::string::npos)
        << results[r].message();
  }
}

// Every rank makes the same bad call: each gets the same message, naming what is wrong.
std::string refusal(const std::function<Status(Communicator&)>& call, int world_size = 2) {
  auto ranks = group(world_size);
  const auto results = run_on_ranks(ranks, call);
  EXPECT_EQ(results[0].code(), StatusCode::kInvalidArgument);
  return results[0].message();
}

TEST(DcpCommunicator, RefusesBadBuffersNamingThem) {
  std::vector<float> a(16), b(8);
  const Device cpu = Device::cpu();
  EXPECT_EQ(refusal([&](Communicator& c) {
              return c.reduce_scatter(TensorView(a.data(), DType::kI32, cpu, {8}),
                                      TensorView(b.data(), DType::kI32, cpu, {4}));
            }),
            "reduce_scatter: send has dtype i32; allowed: f32, f16, bf16");
  EXPECT_EQ(refusal([&](Communicator& c) {
              return c.all_to_all(TensorView(a.data(), DType::kF32, cpu, {8}),
                                  TensorView(b.data(), DType::kF16, cpu, {8}));
            }),
            "all_to_all: recv dtype f16 must equal send's f32");
  EXPECT_EQ(refusal([&](Communicator& c) {
              return c.all_to_all(TensorView(a.data(), DType::kF32, cpu, {8}),
                                  TensorView(a.data() + 4, DType::kF32, cpu, {8}));
            }),
            "all_to_all: send and recv overlap; they must be separate buffers");
  EXPECT_EQ(refusal([&](Communicator& c) {
              return c.all_to_all(TensorView(a.data(), DType::kF32, cpu, {7}),
                                  TensorView(b.data(), DType::kF32, cpu, {7}));
            }),
            "all_to_all: send has 7 elements; must be a multiple of world_size (2)");
  const int64_t shape[] = {2, 2};
  const int64_t strides[] = {1, 2};
  EXPECT_NE(refusal([&](Communicator& c) {
              return c.all_gather(TensorView(a.data(), DType::kF32, cpu, shape, strides),
                                  TensorView(b.data(), DType::kF32, cpu, {8}));
            }).find("all_gather: send must be contiguous"),
            std::string::npos);
  EXPECT_NE(refusal([&](Communicator& c) {
              return c.all_gather(TensorView(a.data(), DType::kF32, Device::cuda(0), {4}),
                                  TensorView(b.data(), DType::kF32, cpu, {8}));
            }).find("all_gather: send"),
            std::string::npos);
  EXPECT_EQ(refusal([&](Communicator& c) {
              return c.all_gather(TensorView(), TensorView(b.data(), DType::kF32, cpu, {8}));
            }),
            "all_gather: send is required");
  int stream_object = 0;
  EXPECT_NE(refusal([&](Communicator& c) {
              return c.all_gather(TensorView(a.data(), DType::kF32, cpu, {4}),
                                  TensorView(b.data(), DType::kF32, cpu, {8}), &stream_object);
            }).find("stream must be null"),
            std::string::npos);
}

TEST(DcpCommunicator, GroupSizeIsChecked) {
  EXPECT_EQ(make_in_process_group(0).status().message(),
            "make_in_process_group: world_size = 0 must be in [1, 1024]");
  EXPECT_FALSE(make_in_process_group(-3).ok());
  auto ranks = group(3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(ranks[r]->rank(), r);
    EXPECT_EQ(ranks[r]->world_size(), 3);
    EXPECT_TRUE(ranks[r]->device().is_cpu());
  }
}

}  // namespace
}  // namespace pagedattn
