// Decode context parallelism on one GPU: what the combine adds to a decode step. A step of 64
// decodes over 32768 keys each (32 query / 8 KV heads, D 128, bf16, blocks of 16) sharded over N =
// 4 in-process ranks (threads, a stream each, the device group) through FLASH_ATTN and FLASHINFER
// on both combine paths: every rank's whole forward, then the combine alone on the same shapes, as
// CUDA-event medians of 20 after 3 warm-ups on rank 0's stream. The ranks share the GPU and meet in
// every collective, so both times count every rank's work and their ratio is the combine's share of
// a rank's step. Each rank enqueues the combine's 20 runs behind a closed StreamGate, so its time
// is the GPU's, as in a serving engine whose host runs ahead (a captured graph, NCCL); its time
// paced by the host (the test double's thread meeting per collective) is printed beside it. Also
// prints the bytes a rank receives per step (the query's all-gather and the combine).
// Run: pagedattn_gpu_bench --gtest_filter='DcpBench.*'.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "dcp/in_process_group.h"
#include "dcp_gpu_support.h"
#include "pagedattn/dcp_combine.h"
#include "stream_gate.h"
#include "testing/counted_communicator.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

constexpr int kWorld = 4, kRequests = 64, kKeys = 32768, kWarmups = 3, kRuns = 20;

CaseSpec decode_step() {
  CaseSpec spec;
  spec.name = "dcp_decode_64x32768";
  spec.seed = 77;
  spec.dtype = DType::kBF16;
  spec.num_heads = 32;
  spec.num_kv_heads = 8;
  spec.head_size = 128;
  spec.block_size = 16;
  spec.seq_lens.assign(kRequests, kKeys);
  spec.query_lens.assign(kRequests, 1);
  return spec;
}

enum class Pace { kGpu, kHost };

// Median milliseconds of fn on `stream` (kRuns after kWarmups), CUDA events around each run; at the
// GPU's pace, the runs are enqueued behind a closed gate.
StatusOr<double> median_ms(cudaStream_t stream, const std::function<Status()>& fn,
                           Pace pace = Pace::kGpu) {
  for (int i = 0; i < kWarmups; ++i) PAGEDATTN_RETURN_IF_ERROR(fn());
  StreamGate gate;
  if (pace == Pace::kGpu) PAGEDATTN_RETURN_IF_ERROR(gate.close(stream));
  std::vector<cudaEvent_t> marks(kRuns + 1);
  for (cudaEvent_t& e : marks) PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e), "an event");
  PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventRecord(marks[0], stream), "recording");
  for (int i = 0; i < kRuns; ++i) {
    PAGEDATTN_RETURN_IF_ERROR(fn());
    PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventRecord(marks[i + 1], stream), "recording");
  }
  if (pace == Pace::kGpu) gate.open();
  PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(marks[kRuns]), "waiting");
  if (pace == Pace::kGpu && gate.timed_out()) {
    return internal_error("the gate opened by its timeout: the runs were paced by the host");
  }
  std::vector<double> ms(kRuns);
  for (int i = 0; i < kRuns; ++i) {
    float t = 0.0f;
    cudaEventElapsedTime(&t, marks[i], marks[i + 1]);
    ms[i] = t;
  }
  for (cudaEvent_t e : marks) cudaEventDestroy(e);
  std::nth_element(ms.begin(), ms.begin() + kRuns / 2, ms.end());
  return ms[kRuns / 2];
}

struct RankTimes {
  double step_ms = 0.0, combine_ms = 0.0, host_paced_combine_ms = 0.0, received_bytes = 0.0;
};

TEST(DcpBench, CombineShareOfADecodeStep) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const CaseSpec spec = decode_step();
  StatusOr<testing::HostBatch> made = testing::make_host_batch(spec, KVCacheLayout::kNHD);
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  const testing::HostBatch& batch = *made;
  StatusOr<DeviceStepInputs> inputs = upload_inputs(batch);
  ASSERT_TRUE(inputs.ok()) << inputs.status().to_string();
  const int64_t tokens = spec.num_tokens(), hq = spec.num_heads / kWorld, d = spec.head_size;
  std::printf("decode %d x %d, %d/%d heads, D %lld, bf16, N = %d in-process ranks on one GPU\n",
              kRequests, kKeys, spec.num_heads, spec.num_kv_heads, static_cast<long long>(d),
              kWorld);
  std::printf("%-10s %-6s %10s %12s %8s %16s %18s\n", "backend", "path", "step ms", "combine ms",
              "share", "bytes/rank/step", "host-paced combine");

  for (const char* name : {"FLASH_ATTN", "FLASHINFER"}) {
    for (const DcpCommBackend path : {DcpCommBackend::kAgRs, DcpCommBackend::kA2a}) {
      auto host_group = make_in_process_group(kWorld);
      auto device_group = dcp::make_in_process_group(kWorld, Device::cuda(0));
      ASSERT_TRUE(host_group.ok() && device_group.ok());
      std::vector<std::unique_ptr<testing::CountedCommunicator>> counted;
      std::vector<DeviceRankStep> steps;
      for (int r = 0; r < kWorld; ++r) {
        counted.push_back(std::make_unique<testing::CountedCommunicator>(*(*device_group)[r]));
        StatusOr<testing::DcpRankStep> cut =
            testing::make_dcp_rank_step(batch, kWorld, r, 1, (*host_group)[r].get(), path);
        ASSERT_TRUE(cut.ok()) << cut.status().to_string();
        StatusOr<DeviceRankStep> step = upload_rank_step(*cut, *inputs, counted.back().get());
        ASSERT_TRUE(step.ok()) << step.status().to_string();
        steps.push_back(std::move(*step));
      }
      std::vector<RankTimes> times(kWorld);
      const AttentionBackend& backend = *find_backend(name);
      const std::vector<Status> ran = run_on_rank_streams(
          *device_group, [&](Communicator& comm, cudaStream_t stream) -> Status {
            const int r = comm.rank();
            DeviceRankStep& step = steps[r];
            PAGEDATTN_ASSIGN_OR_RETURN(auto builder, backend.make_builder(step.builder));
            PAGEDATTN_ASSIGN_OR_RETURN(auto impl, backend.make_impl(step.impl));
            PAGEDATTN_ASSIGN_OR_RETURN(auto metadata, builder->build(0, step.meta));
            const KVCacheView cache(step.cache.view());
            PAGEDATTN_RETURN_IF_ERROR(impl->do_kv_cache_update(inputs->key.view, inputs->value.view,
                                                               cache, step.slot_mapping.view,
                                                               inputs->scales(), stream));
            counted[r]->take_received_bytes();
            // The step's attention (milliseconds) keeps the host ahead without a gate, whose
            // queue twenty whole steps could overfill.
            const auto forward = [&] {
              return impl->forward(step.query, inputs->key.view, inputs->value.view, cache,
                                   *metadata, step.output.view, step.lse.view, inputs->scales(),
                                   stream);
            };
            PAGEDATTN_ASSIGN_OR_RETURN(times[r].step_ms, median_ms(stream, forward, Pace::kHost));
            times[r].received_bytes = counted[r]->take_received_bytes() / (kWarmups + kRuns);
            // The combine alone, on partials of pass (a)'s shapes (the layer's dtype, f32 LSEs).
            PAGEDATTN_ASSIGN_OR_RETURN(DeviceTensor partial,
                                       poisoned(spec.dtype, {tokens, kWorld * hq, d}));
            PAGEDATTN_ASSIGN_OR_RETURN(DeviceTensor partial_lse,
                                       poisoned(DType::kF32, {kWorld * hq, tokens}));
            PAGEDATTN_ASSIGN_OR_RETURN(DeviceTensor out, poisoned(spec.dtype, {tokens, hq, d}));
            PAGEDATTN_ASSIGN_OR_RETURN(DeviceTensor out_lse, poisoned(DType::kF32, {hq, tokens}));
            for (DeviceTensor* t : {&partial, &partial_lse}) {  // finite partials, as a pass writes
              PAGEDATTN_CUDA_RETURN_IF_ERROR(cudaMemset(t->buffer.data(), 0, t->view.nbytes()),
                                             "zeroing the partials");
            }
            const auto combine = [&] {
              return dcp_combine(comm, path, partial.view, partial_lse.view, out.view, out_lse.view,
                                 stream);
            };
            PAGEDATTN_ASSIGN_OR_RETURN(times[r].combine_ms, median_ms(stream, combine));
            PAGEDATTN_ASSIGN_OR_RETURN(times[r].host_paced_combine_ms,
                                       median_ms(stream, combine, Pace::kHost));
            return ok_status();
          });
      for (const Status& s : ran) ASSERT_TRUE(s.ok()) << name << ": " << s.to_string();
      const RankTimes& t = times[0];
      std::printf("%-10s %-6s %10.3f %12.3f %7.1f%% %16.0f %18.3f\n", name,
                  std::string(dcp_comm_backend_name(path)).c_str(), t.step_ms, t.combine_ms,
                  100.0 * t.combine_ms / t.step_ms, t.received_bytes, t.host_paced_combine_ms);
    }
  }
}

}  // namespace
}  // namespace pagedattn::test
