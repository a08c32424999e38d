// Test harness for the decode kernel family: a random paged batch (make_host_batch) whose requests
// are all decodes (q_len <= 8), planned on the host with plan_decode, run on the device with
// poisoned outputs and partials, and compared with the float64 oracle.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kernels/decode/decode_attention.h"
#include "pagedattn/device_info.h"
#include "paged_attention_harness.h"
#include "plan/decode_plan.h"

namespace pagedattn::test {

struct DecodeRunOptions {
  int num_ctas = 0;          // 0: the device's SMs x the kernel's CTAs per SM
  // Another launch than the library's (tests of one tile configuration): its launcher and CTAs per
  // SM.
  std::function<Status(const kernels::DecodeAttentionParams&)> launch;
  int ctas_per_sm = 0;
  int fixed_chunk_tokens = 0;  // deterministic mode
  int unit_overhead_tokens = plan::kUnitOverheadTokens;
  int cut_penalty_tokens = plan::kCutPenaltyTokens;  // 0: never an uncut plan
  // The same plan launched this many times, outputs and partials poisoned before each (as every
  // layer of a step runs it): the plan's merge counts must be back at 0 after each launch.
  int launches = 1;
  CachePlacement placement;
};

struct DecodeRunResult {
  reference::Comparison cmp;
  std::vector<uint16_t> out;  // raw output bits
  plan::DecodePlanStats stats;
};

inline int device_decode_ctas(const testing::CaseSpec& spec, DType cache_dtype,
                              int ctas_per_sm) {
  const int sms = cuda_device(0)->num_sms;
  if (ctas_per_sm <= 0) {
    ctas_per_sm = kernels::decode_attention_ctas_per_sm(spec.head_size, spec.dtype, cache_dtype);
  }
  return sms * std::max(1, ctas_per_sm);
}

inline DecodeRunResult run_decode_case(const testing::CaseSpec& spec, KVCacheLayout layout,
                                       const DecodeRunOptions& opt = {}) {
  DecodeRunResult result;
  auto batch_or = testing::make_host_batch(spec, layout);
  EXPECT_TRUE(batch_or.ok()) << batch_or.status().to_string();
  if (!batch_or.ok()) return result;
  testing::HostBatch& b = batch_or.value();
  write_new_tokens(b);
  auto ref = reference::reference_attention(testing::reference_inputs(b, b.kv_cache.view()),
                                            b.params);
  EXPECT_TRUE(ref.ok()) << ref.status().to_string();
  if (!ref.ok()) return result;

  const TensorView& cache = b.kv_cache.view();
  plan::DecodePlanConfig config;
  config.num_ctas =
      opt.num_ctas > 0 ? opt.num_ctas : device_decode_ctas(spec, cache.dtype(), opt.ctas_per_sm);
  config.num_heads = spec.num_heads;
  config.num_kv_heads = spec.num_kv_heads;
  config.window_left = b.params.sliding_window.left;
  config.fixed_chunk_tokens = opt.fixed_chunk_tokens;
  config.unit_overhead_tokens = opt.unit_overhead_tokens;
  config.cut_penalty_tokens = opt.cut_penalty_tokens;
  const int T = static_cast<int>(spec.num_tokens());
  int max_seq = 1;
  for (int s : spec.seq_lens) max_seq = std::max(max_seq, s);
  const plan::DecodePlanLimits limits =
      plan::decode_plan_limits(config, spec.num_reqs(), T, max_seq);
  std::vector<int4> plan_host(static_cast<size_t>(limits.plan_bytes + 15) / 16);
  plan::DecodePlanScratch scratch;
  const std::span<const int32_t> qsl(b.query_start_loc.data<int32_t>(), spec.num_reqs() + 1);
  const std::span<const int32_t> seqs(b.seq_lens.data<int32_t>(), spec.num_reqs());
  auto stats = plan::plan_decode(qsl, seqs, config, limits, scratch, plan_host.data());
  EXPECT_TRUE(stats.ok()) << stats.status().to_string();
  if (!stats.ok()) return result;
  result.stats = *stats;

  const DeviceBatch dev(b, opt.placement);
  DeviceBuffer plan_dev(plan_host.data(), static_cast<size_t>(limits.plan_bytes));
  const size_t prows = static_cast<size_t>(std::max<int64_t>(1, limits.max_partial_rows));
  DeviceBuffer partial_out(prows * spec.head_size * 4), partial_lse(prows * 4);
  kernels::DecodeAttentionParams p;
  dev.fill(p);
  p.plan = plan_dev.get();
  p.partial_out = partial_out.as<float>();
  p.partial_lse = partial_lse.as<float>();
  p.num_ctas = config.num_ctas;

  for (int launch = 0; launch < opt.launches; ++launch) {
    dev.out.poison();
    dev.lse.poison();
    partial_out.poison();
    partial_lse.poison();
    const Status st = opt.launch ? opt.launch(p) : kernels::launch_decode_attention(p, nullptr);
    EXPECT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  result.cmp = dev.compare(*ref, result.out);
  return result;
}

// A pool test's run (NHD): `ctas` CTAs (0: the device's grid) launched three times, so that the
// pool's counters must be back at 0 after each launch; expects the oracle's pass.
inline DecodeRunResult run_pool_case(const testing::CaseSpec& c, DecodeRunOptions o, int ctas) {
  o.num_ctas = ctas;
  o.launches = 3;
  DecodeRunResult r = run_decode_case(c, KVCacheLayout::kNHD, o);
  EXPECT_TRUE(r.cmp.pass) << c.name << ": max_abs " << r.cmp.max_abs_error << "\n" << r.cmp.detail;
  return r;
}

}  // namespace pagedattn::test
