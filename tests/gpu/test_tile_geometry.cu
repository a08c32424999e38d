// The split-KV planner counts the CTAs the v2 kernel's own scheduler launches, and the score
// transforms of common/mask.h give on the device what they give on the host (the soft
// cap at caps from 1 to 1e30 included).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda_test_support.h"
#include "common/mask.h"
#include "kernels/attention/v2/tile_scheduler.cuh"
#include "plan/split_kv.h"

namespace pagedattn::test {
namespace {

namespace v2 = kernels::attention::v2;

// CTAs the kernel launches for one request of q_len tokens alone (one split): the prefill-shaped
// grid when its rows exceed the decode-shaped tile, else the decode-shaped one.
template <int kHeadDim>
int64_t kernel_ctas(int q_len, int num_heads, int num_kv_heads) {
  using Small = typename v2::SmallTile<kHeadDim, false>::Type;
  using Large = typename v2::LargeTile<kHeadDim>::Type;
  v2::KernelArgs a;
  a.p.num_reqs = 1;
  a.p.max_num_splits = 1;
  a.p.max_query_len = q_len;
  a.p.num_heads = num_heads;
  a.p.num_kv_heads = num_kv_heads;
  a.group = num_heads / num_kv_heads;
  a.dchunks = v2::column_chunks(kHeadDim);
  const unsigned row_tiles = v2::prefill_row_tiles<Small, Large>(a);
  const dim3 grid = v2::grid_shape(a, row_tiles > 0 ? row_tiles : 1u);
  return static_cast<int64_t>(grid.x) * grid.y;
}

template <int kHeadDim>
void expect_planner_counts_kernel_ctas() {
  for (int q_len : {1, 2, 4, 5, 16, 17, 31, 32, 33, 64, 65, 100, 1000, 4097}) {
    for (auto [hq, hkv] : {std::pair{32, 8}, {8, 8}, {28, 4}, {64, 1}}) {
      EXPECT_EQ(plan::request_ctas(q_len, hq, hkv, kHeadDim), kernel_ctas<kHeadDim>(q_len, hq, hkv))
          << "head size " << kHeadDim << ", query_len " << q_len << ", heads " << hq << "/" << hkv;
    }
  }
}

TEST(TileGeometry, PlannerCountsTheKernelsCtas) {
  expect_planner_counts_kernel_ctas<64>();
  expect_planner_counts_kernel_ctas<80>();
  expect_planner_counts_kernel_ctas<96>();
  expect_planner_counts_kernel_ctas<128>();
  expect_planner_counts_kernel_ctas<192>();
  expect_planner_counts_kernel_ctas<256>();
  expect_planner_counts_kernel_ctas<512>();
}

struct Probe {
  float raw;
  float scale;
  float cap;
  int pos;
  int key;
};

__global__ void transform_on_device(const Probe* probes, int n, float* capped, float* bias) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const Probe p = probes[i];
  capped[i] = mask::soft_capped(
      mask::make_soft_cap(p.scale, p.cap, 1.0f), p.raw);
  bias[i] = mask::alibi_bias(0.75f, p.pos, p.key);
}

TEST(TileGeometry, ScoreTransformsOnTheDeviceMatchTheHost) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  std::vector<Probe> probes;
  for (double cap = 1.0; cap <= 1e30; cap *= 10.0) {
    for (float raw : {-250.0f, -3.0f, -1e-4f, 0.0f, 0.5f, 7.0f, 90.0f}) {
      probes.push_back({raw, 0.3f, static_cast<float>(cap), static_cast<int>(probes.size()), 17});
    }
  }
  const int n = static_cast<int>(probes.size());
  Probe* d_probes;
  float *d_capped, *d_bias;
  PAGEDATTN_EXPECT_CUDA_OK(cudaMalloc(&d_probes, n * sizeof(Probe)));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMalloc(&d_capped, n * sizeof(float)));
  PAGEDATTN_EXPECT_CUDA_OK(cudaMalloc(&d_bias, n * sizeof(float)));
  PAGEDATTN_EXPECT_CUDA_OK(
      cudaMemcpy(d_probes, probes.data(), n * sizeof(Probe), cudaMemcpyHostToDevice));
  transform_on_device<<<(n + 127) / 128, 128>>>(d_probes, n, d_capped, d_bias);
  PAGEDATTN_EXPECT_CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> capped(n), bias(n);
  PAGEDATTN_EXPECT_CUDA_OK(
      cudaMemcpy(capped.data(), d_capped, n * sizeof(float), cudaMemcpyDeviceToHost));
  PAGEDATTN_EXPECT_CUDA_OK(
      cudaMemcpy(bias.data(), d_bias, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const Probe& p = probes[i];
    const double s = static_cast<double>(p.scale) * p.raw;
    const double want = p.cap * std::tanh(s / p.cap);
    EXPECT_NEAR(capped[i], want, 1e-6 * std::fabs(want) + 1e-30)
        << "cap " << p.cap << " raw " << p.raw;
    EXPECT_EQ(bias[i], 0.75f * std::fabs(static_cast<float>(p.pos - p.key)));
  }
  cudaFree(d_probes);
  cudaFree(d_capped);
  cudaFree(d_bias);
}

}  // namespace
}  // namespace pagedattn::test
