// FLASHINFER's host costs (Google Benchmark): the step planning alone (vLLM's page arrays, the
// prefill plan, the decode plan; no GPU needed), and, on a CUDA device, the whole build() (checks,
// planning, the one asynchronous copy) and the host time of one forward launch per layer.
// Batches: n decodes over 1..8192 keys plus one 512-token prefill, 32/8 heads, D 128, block 16.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <memory>
#include <random>
#include <vector>

#include "pagedattn/backend.h"
#include "plan/page_indptr.h"
#include "plan/prefill_plan.h"
#include "plan/workspace.h"
#include "runtime/device_buffer.h"

namespace pagedattn {
namespace {

constexpr int kHq = 32, kHkv = 8, kD = 128, kBlock = 16, kMaxSeq = 8192, kPrefill = 512;

struct Step {
  std::vector<int32_t> qsl{0}, seqs;
  int max_blocks = 0;
  explicit Step(int decodes) {
    std::mt19937 rng(3);
    for (int r = 0; r < decodes; ++r) {
      qsl.push_back(qsl.back() + 1);
      seqs.push_back(1 + static_cast<int>(rng() % kMaxSeq));
    }
    qsl.push_back(qsl.back() + kPrefill);
    seqs.push_back(kPrefill + 1000);
    for (int s : seqs) max_blocks = std::max(max_blocks, (s + kBlock - 1) / kBlock);
  }
  int num_reqs() const { return static_cast<int>(seqs.size()); }
};

plan::DecodePlanConfig decode_config() {
  plan::DecodePlanConfig c;
  c.num_ctas = 264;  // H200: 132 SMs x 2
  c.num_heads = kHq;
  c.num_kv_heads = kHkv;
  return c;
}

void BM_PlanStep(benchmark::State& state) {
  const Step step(static_cast<int>(state.range(0)));
  const int n = step.num_reqs(), nd = n - 1;
  plan::WorkspaceLimits limits;
  limits.max_num_reqs = n;
  limits.max_num_tokens = step.qsl.back();
  limits.max_model_len = kMaxSeq + 2048;
  limits.decode = decode_config();
  const plan::WorkspaceLayout l = plan::workspace_layout(limits);
  std::vector<int4> mirror(static_cast<size_t>(l.int_bytes + 15) / 16);
  char* host = reinterpret_cast<char*>(mirror.data());
  auto ints = [&](int64_t offset, int count) {
    return std::span<int32_t>(reinterpret_cast<int32_t*>(host + offset), count);
  };
  plan::SplitKVConfig split;
  split.num_heads = kHq;
  split.num_kv_heads = kHkv;
  split.head_size = kD;
  split.block_size = kBlock;
  plan::DecodePlanScratch scratch;
  for (auto _ : state) {
    plan::paged_kv_indptr(step.seqs, kBlock, ints(l.kv_indptr_offset, n + 1),
                          ints(l.last_page_len_offset, n));
    auto prefill = plan::plan_prefill(step.qsl, step.seqs, nd, split, true,
                                      ints(l.prefill_cu_offset, n + 1),
                                      ints(l.prefill_splits_offset, n));
    auto decode = plan::plan_decode(std::span(step.qsl).first(nd + 1),
                                    std::span(step.seqs).first(nd), limits.decode, l.decode,
                                    scratch, host + l.decode_plan_offset);
    benchmark::DoNotOptimize(prefill);
    benchmark::DoNotOptimize(decode);
  }
}
BENCHMARK(BM_PlanStep)->Arg(16)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

bool have_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// The step's metadata with device tensors where vLLM has them (contents of the block table and
// slot mapping do not matter to build()).
struct DeviceStep {
  Step step;
  runtime::DeviceBuffer qsl, seqs, table, slots;
  CommonAttentionMetadata meta;
  explicit DeviceStep(int decodes) : step(decodes) {
    const int n = step.num_reqs(), tokens = step.qsl.back();
    qsl = std::move(runtime::DeviceBuffer::allocate(0, 4 * (n + 1))).value();
    seqs = std::move(runtime::DeviceBuffer::allocate(0, 4 * n)).value();
    table = std::move(runtime::DeviceBuffer::allocate(0, 4 * int64_t{n} * step.max_blocks)).value();
    slots = std::move(runtime::DeviceBuffer::allocate(0, 8 * int64_t{tokens})).value();
    cudaMemcpy(qsl.data(), step.qsl.data(), 4 * (n + 1), cudaMemcpyHostToDevice);
    cudaMemcpy(seqs.data(), step.seqs.data(), 4 * n, cudaMemcpyHostToDevice);
    const Device gpu = Device::cuda(0);
    meta.query_start_loc = TensorView(qsl.data(), DType::kI32, gpu, {n + 1});
    meta.query_start_loc_cpu = TensorView(step.qsl.data(), DType::kI32, Device::cpu(), {n + 1});
    meta.seq_lens = TensorView(seqs.data(), DType::kI32, gpu, {n});
    meta.seq_lens_cpu = TensorView(step.seqs.data(), DType::kI32, Device::cpu(), {n});
    meta.num_reqs = n;
    meta.num_actual_tokens = tokens;
    meta.max_query_len = kPrefill;
    meta.max_seq_len = *std::max_element(step.seqs.begin(), step.seqs.end());
    meta.block_table_tensor = TensorView(table.data(), DType::kI32, gpu, {n, step.max_blocks});
    meta.slot_mapping = TensorView(slots.data(), DType::kI64, gpu, {tokens});
  }
  BuilderParams params() const {
    BuilderParams bp;
    bp.num_heads = kHq;
    bp.num_kv_heads = kHkv;
    bp.head_size = kD;
    bp.block_size = kBlock;
    bp.device = Device::cuda(0);
    bp.max_num_reqs = step.num_reqs();
    bp.max_num_tokens = step.qsl.back();
    bp.max_model_len = kMaxSeq + 2048;
    return bp;
  }
};

void BM_BuildOnDevice(benchmark::State& state) {
  if (!have_device()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  DeviceStep d(static_cast<int>(state.range(0)));
  auto builder = find_backend("FLASHINFER")->make_builder(d.params());
  if (!builder.ok()) {
    state.SkipWithError(builder.status().to_string().c_str());
    return;
  }
  for (auto _ : state) {
    auto md = (*builder)->build(0, d.meta);
    benchmark::DoNotOptimize(md);
  }
  cudaDeviceSynchronize();
}
BENCHMARK(BM_BuildOnDevice)->Arg(16)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

// Host time of one layer's forward (launches only; the device drains every 64 calls).
void BM_ForwardLaunch(benchmark::State& state) {
  if (!have_device()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  DeviceStep d(static_cast<int>(state.range(0)));
  const AttentionBackend* backend = find_backend("FLASHINFER");
  auto builder = backend->make_builder(d.params());
  AttentionImplParams ip;
  ip.num_heads = kHq;
  ip.num_kv_heads = kHkv;
  ip.head_size = kD;
  ip.device = Device::cuda(0);
  auto impl = backend->make_impl(ip);
  if (!builder.ok() || !impl.ok()) {
    state.SkipWithError("make_builder / make_impl failed");
    return;
  }
  auto md = (*builder)->build(0, d.meta);
  const int tokens = d.step.qsl.back();
  const int64_t blocks = int64_t{d.step.num_reqs()} * d.step.max_blocks;
  auto q = runtime::DeviceBuffer::allocate(0, 2 * int64_t{tokens} * kHq * kD);
  auto out = runtime::DeviceBuffer::allocate(0, 2 * int64_t{tokens} * kHq * kD);
  auto cache = runtime::DeviceBuffer::allocate(0, 2 * blocks * 2 * kBlock * kHkv * kD);
  if (!md.ok() || !q.ok() || !out.ok() || !cache.ok()) {
    state.SkipWithError("build or allocation failed");
    return;
  }
  cudaMemset(cache->data(), 0, cache->bytes());  // block table zeros: every page is block 0
  cudaMemset(q->data(), 0, q->bytes());
  const Device gpu = Device::cuda(0);
  const TensorView qv(q->data(), DType::kBF16, gpu, {tokens, kHq, kD});
  const TensorView ov(out->data(), DType::kBF16, gpu, {tokens, kHq, kD});
  const TensorView cv(cache->data(), DType::kBF16, gpu, {blocks, 2, kBlock, kHkv, kD});
  int calls = 0;
  for (auto _ : state) {
    const Status st = (*impl)->forward(qv, TensorView(), TensorView(), cv, **md, ov, TensorView(),
                                       KVScales{}, nullptr);
    benchmark::DoNotOptimize(st);
    if (++calls % 64 == 0) {
      state.PauseTiming();
      cudaDeviceSynchronize();
      state.ResumeTiming();
    }
  }
  cudaDeviceSynchronize();
}
BENCHMARK(BM_ForwardLaunch)->Arg(16)->Arg(256)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pagedattn

BENCHMARK_MAIN();
