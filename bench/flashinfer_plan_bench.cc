// FLASHINFER's host costs (Google Benchmark): the step planning alone (vLLM's page arrays, the
// prefill plan, the decode plan; no GPU needed), and, on a CUDA device, the whole build() of
// FLASHINFER and FLASH_ATTN (checks, planning, the copy), the pieces build() is made of timed
// alone (the CUDA runtime calls, the step checks, the plan's copy), and the host time of one
// forward launch per layer. 32/8 heads, D 128, block 16. Two batch shapes (second argument):
//   0: n decodes over 1..8192 keys (random) plus one 512-token prefill, limits fitted to the batch;
//   1: n decodes over 64..512 keys (evenly spread) with the CLI's limits, as `pagedattn bench
//      --suite overhead` times build().
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "backends/gpu/checks.h"
#include "pagedattn/backend.h"
#include "plan/page_indptr.h"
#include "plan/prefill_plan.h"
#include "plan/workspace.h"
#include "runtime/check.h"
#include "runtime/device_buffer.h"

namespace pagedattn {
namespace {

constexpr int kHq = 32, kHkv = 8, kD = 128, kBlock = 16, kMaxSeq = 8192, kPrefill = 512;
constexpr int kCtas = 264;  // H200: 132 SMs x 2 decode CTAs

struct Step {
  std::vector<int32_t> qsl{0}, seqs;
  int max_blocks = 0;
  int max_query_len = 1;
  BuilderParams params;  // the builder's limits for this shape
  Step(int decodes, int shape) {
    std::mt19937 rng(3);
    for (int r = 0; r < decodes; ++r) {
      qsl.push_back(qsl.back() + 1);
      seqs.push_back(shape == 0 ? 1 + static_cast<int>(rng() % kMaxSeq)
                                : 64 + r * (512 - 64) / std::max(1, decodes - 1));
    }
    if (shape == 0) {
      qsl.push_back(qsl.back() + kPrefill);
      seqs.push_back(kPrefill + 1000);
      max_query_len = kPrefill;
    }
    for (int s : seqs) max_blocks = std::max(max_blocks, (s + kBlock - 1) / kBlock);
    params.num_heads = kHq;
    params.num_kv_heads = kHkv;
    params.head_size = kD;
    params.block_size = kBlock;
    params.device = Device::cuda(0);
    if (shape == 0) {
      params.max_num_reqs = num_reqs();
      params.max_num_tokens = qsl.back();
      params.max_model_len = kMaxSeq + 2048;
    } else {  // testing::builder_params_for: the defaults, raised to fit the batch
      params.max_num_reqs = std::max(params.max_num_reqs, num_reqs());
    }
  }
  int num_reqs() const { return static_cast<int>(seqs.size()); }
  int num_decodes() const { return static_cast<int>(qsl.size()) - 1 - (max_query_len > 1); }
};

plan::WorkspaceLimits workspace_limits(const Step& step) {
  plan::WorkspaceLimits limits;
  limits.max_num_reqs = step.params.max_num_reqs;
  limits.max_num_tokens = step.params.max_num_tokens;
  limits.max_model_len = step.params.max_model_len;
  limits.decode.num_ctas = kCtas;
  limits.decode.num_heads = kHq;
  limits.decode.num_kv_heads = kHkv;
  return limits;
}

// The host planning of one step, as FLASHINFER's build() runs it; returns the bytes to copy.
struct Planner {
  plan::WorkspaceLimits limits;
  plan::WorkspaceLayout layout;
  std::vector<int4> mirror;
  plan::SplitKVConfig split;
  plan::DecodePlanScratch scratch;
  explicit Planner(const Step& step)
      : limits(workspace_limits(step)),
        layout(plan::workspace_layout(limits)),
        mirror(static_cast<size_t>(layout.int_bytes + 15) / 16) {
    split.num_heads = kHq;
    split.num_kv_heads = kHkv;
    split.head_size = kD;
    split.block_size = kBlock;
  }
  std::span<int32_t> ints(int64_t offset, int count) {
    return {reinterpret_cast<int32_t*>(reinterpret_cast<char*>(mirror.data()) + offset),
            static_cast<size_t>(count)};
  }
  int64_t run(const Step& step) {
    const int n = step.num_reqs(), nd = step.num_decodes();
    plan::paged_kv_indptr(step.seqs, kBlock, ints(layout.kv_indptr_offset, n + 1),
                          ints(layout.last_page_len_offset, n));
    auto prefill = plan::plan_prefill(step.qsl, step.seqs, nd, split, true,
                                      ints(layout.prefill_cu_offset, n + 1),
                                      ints(layout.prefill_splits_offset, n));
    auto decode = plan::plan_decode(
        std::span(step.qsl).first(nd + 1), std::span(step.seqs).first(nd), limits.decode,
        layout.decode, scratch, reinterpret_cast<char*>(mirror.data()) + layout.decode_plan_offset);
    benchmark::DoNotOptimize(prefill);
    return layout.decode_plan_offset + (decode.ok() ? decode->bytes_used : 0);
  }
};

void shape_args(benchmark::internal::Benchmark* b) {
  for (int shape : {0, 1}) {
    for (int n : {16, 256, 1024}) b->Args({n, shape});
  }
}

void BM_PlanStep(benchmark::State& state) {
  const Step step(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  Planner planner(step);
  for (auto _ : state) benchmark::DoNotOptimize(planner.run(step));
}
BENCHMARK(BM_PlanStep)->Apply(shape_args)->Unit(benchmark::kMicrosecond);

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
  DeviceStep(int decodes, int shape) : step(decodes, shape) {
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
    meta.max_query_len = step.max_query_len;
    meta.max_seq_len = *std::max_element(step.seqs.begin(), step.seqs.end());
    meta.block_table_tensor = TensorView(table.data(), DType::kI32, gpu, {n, step.max_blocks});
    meta.slot_mapping = TensorView(slots.data(), DType::kI64, gpu, {tokens});
  }
};

// Skips the benchmark (with the reason) when there is no device; true when it may run.
bool need_device(benchmark::State& state) {
  if (have_device()) return true;
  state.SkipWithError("no CUDA device");
  return false;
}

void BM_BuildOnDevice(benchmark::State& state, const char* backend) {
  if (!need_device(state)) return;
  const DeviceStep d(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  auto builder = find_backend(backend)->make_builder(d.step.params);
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
BENCHMARK_CAPTURE(BM_BuildOnDevice, flashinfer, "FLASHINFER")
    ->Apply(shape_args)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BuildOnDevice, flash_attn, "FLASH_ATTN")
    ->Apply(shape_args)
    ->Unit(benchmark::kMicrosecond);

// The pieces of build(), each alone. The step checks (gpu::check_step).
void BM_PieceCheckStep(benchmark::State& state) {
  if (!need_device(state)) return;
  const DeviceStep d(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  for (auto _ : state) benchmark::DoNotOptimize(gpu::check_step(d.step.params, d.meta));
}
BENCHMARK(BM_PieceCheckStep)->Apply(shape_args)->Unit(benchmark::kMicrosecond);

// The device guard build() takes (cudaGetDevice, and cudaSetDevice on the way out).
void BM_PieceScopedDevice(benchmark::State& state) {
  if (!need_device(state)) return;
  for (auto _ : state) {
    runtime::ScopedDevice guard(0);
    benchmark::DoNotOptimize(guard.status());
  }
}
BENCHMARK(BM_PieceScopedDevice);

void BM_PieceGetDevice(benchmark::State& state) {
  if (!need_device(state)) return;
  int device = -1;
  for (auto _ : state) benchmark::DoNotOptimize(cudaGetDevice(&device));
}
BENCHMARK(BM_PieceGetDevice);

void BM_PieceSetSameDevice(benchmark::State& state) {
  if (!need_device(state)) return;
  for (auto _ : state) benchmark::DoNotOptimize(cudaSetDevice(0));
}
BENCHMARK(BM_PieceSetSameDevice);

// Waiting for (range 0 = 0: synchronize, 1: query) an event that has long completed.
void BM_PieceEventDone(benchmark::State& state) {
  if (!need_device(state)) return;
  cudaEvent_t event = nullptr;
  cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  cudaEventRecord(event, nullptr);
  cudaDeviceSynchronize();
  for (auto _ : state) {
    benchmark::DoNotOptimize(state.range(0) == 0 ? cudaEventSynchronize(event)
                                                 : cudaEventQuery(event));
  }
  cudaEventDestroy(event);
}
BENCHMARK(BM_PieceEventDone)->Arg(0)->Arg(1);

// StepWorkspace's per-step CUDA calls on a plan of range(0) bytes: wait for the copy two steps
// back, one cudaMemcpyAsync from pinned memory, cudaEventRecord (range 1 = 0: all three; 1: the
// copy alone; 2: the record alone; 3: FLASH_ATTN's way, one copy from pageable memory). The
// device drains every 64 steps, untimed.
void BM_PieceUpload(benchmark::State& state) {
  if (!need_device(state)) return;
  const int64_t bytes = state.range(0);
  const int64_t what = state.range(1);
  auto device = runtime::DeviceBuffer::allocate(0, bytes);
  char* mirrors[2] = {nullptr, nullptr};
  cudaEvent_t copied[2] = {nullptr, nullptr};
  for (int i = 0; i < 2; ++i) {
    cudaHostAlloc(reinterpret_cast<void**>(&mirrors[i]), bytes, cudaHostAllocDefault);
    std::fill_n(mirrors[i], bytes, char{1});
    cudaEventCreateWithFlags(&copied[i], cudaEventDisableTiming);
  }
  std::vector<char> pageable(static_cast<size_t>(bytes), char{1});
  int current = 0, steps = 0;
  for (auto _ : state) {
    current ^= 1;
    if (what == 3) {
      benchmark::DoNotOptimize(
          cudaMemcpyAsync(device->data(), pageable.data(), bytes, cudaMemcpyHostToDevice, nullptr));
    }
    if (what == 0) benchmark::DoNotOptimize(cudaEventSynchronize(copied[current]));
    if (what <= 1) {
      benchmark::DoNotOptimize(cudaMemcpyAsync(device->data(), mirrors[current], bytes,
                                               cudaMemcpyHostToDevice, nullptr));
    }
    if (what == 0 || what == 2) {
      benchmark::DoNotOptimize(cudaEventRecord(copied[current], nullptr));
    }
    if (++steps % 64 == 0) {
      state.PauseTiming();
      cudaDeviceSynchronize();
      state.ResumeTiming();
    }
  }
  cudaDeviceSynchronize();
  for (int i = 0; i < 2; ++i) {
    cudaEventDestroy(copied[i]);
    cudaFreeHost(mirrors[i]);
  }
}
BENCHMARK(BM_PieceUpload)
    ->ArgsProduct({{1 << 10, 16 << 10, 64 << 10, 256 << 10}, {0, 1, 2, 3}})
    ->Unit(benchmark::kMicrosecond);

// Host time of one layer's forward (launches only; the device drains every 64 calls).
void BM_ForwardLaunch(benchmark::State& state) {
  if (!need_device(state)) return;
  const DeviceStep d(static_cast<int>(state.range(0)), 0);
  const AttentionBackend* backend = find_backend("FLASHINFER");
  auto builder = backend->make_builder(d.step.params);
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
