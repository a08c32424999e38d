// Parity: the same seeded random batches (odd sizes, GQA, FP8, features, cascade) through every
// registered backend this build and machine can run, each compared with the float64 oracle and
// with every other. A backend that cannot run here (not built, no CUDA device) or does not serve a
// case's configuration is reported as skipped with its reasons, never silently passed.
#include <gtest/gtest.h>

#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/numeric.h"
#include "pagedattn/backend.h"
#include "pagedattn/device_info.h"
#include "testing/batch_params.h"
#include "testing/step_runner.h"

namespace pagedattn::testing {
// gtest prints a case beside the test's name (ctest -N): its name, not its bytes.
inline void PrintTo(const CaseSpec& spec, std::ostream* os) { *os << spec.name; }
}  // namespace pagedattn::testing

namespace pagedattn::parity {
namespace {

using testing::CaseSpec;
using testing::StepRunner;

// A random batch for the seed: 1-9 requests of odd lengths (decodes, short and long prefills),
// GQA groups 1-7, one of the cache dtypes, and a mix of the features.
CaseSpec random_case(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  CaseSpec s;
  s.name = "parity_" + std::to_string(seed);
  s.seed = seed;
  s.dtype = pick(2) ? DType::kBF16 : DType::kF16;
  const KVCacheDType kv[] = {KVCacheDType::kAuto, KVCacheDType::kFP8E4M3, KVCacheDType::kFP8E5M2};
  s.kv_cache_dtype = kv[pick(3)];
  s.kv_scale_per_head = pick(2);
  s.num_kv_heads = 1 + pick(3);
  s.num_heads = s.num_kv_heads * (1 + pick(7));
  s.head_size = 128;  // a size every GPU build has a kernel for
  s.block_size = pick(2) ? 16 : 32;
  s.kv_layout = pick(2) ? KVCacheLayout::kNHD : KVCacheLayout::kHND;
  s.sinks = pick(3) == 0;
  s.logits_soft_cap = pick(4) == 0 ? 20.0 : 0.0;
  s.causal = pick(5) != 0;
  const int num_reqs = 1 + pick(9);
  for (int r = 0; r < num_reqs; ++r) {
    const int q = pick(3) == 0 ? 1 + pick(61) : 1;
    s.query_lens.push_back(q);
    s.seq_lens.push_back(q + pick(500));
  }
  return s;
}

// The same batch as cascade: every request gets `prefix` more context tokens, shared.
CaseSpec with_shared_prefix(CaseSpec s, int prefix) {
  s.name += "_cascade";
  s.common_prefix_len = prefix;
  for (int& len : s.seq_lens) len += prefix;
  return s;
}

std::vector<CaseSpec> parity_cases() {
  std::vector<CaseSpec> cases;
  for (uint64_t seed = 101; seed < 109; ++seed) cases.push_back(random_case(seed));
  CaseSpec alibi = random_case(211);
  alibi.name += "_alibi";
  alibi.alibi = true;
  cases.push_back(alibi);
  CaseSpec window = random_case(223);
  window.name += "_window";
  window.sliding_window = SlidingWindow{57, window.causal ? 0 : 13};
  cases.push_back(window);
  for (uint64_t seed : {307, 311, 313}) cases.push_back(with_shared_prefix(random_case(seed), 256));
  cases.push_back(with_shared_prefix(alibi, 256));  // a feature FLASH_ATTN's cascade refuses
  return cases;
}

// Where a backend runs here, or why it cannot.
struct Placement {
  const AttentionBackend* backend = nullptr;
  Device device;
  std::string skipped;  // non-empty: why the backend does not run on this machine
};

std::vector<Placement> placements() {
  std::vector<Placement> out;
  for (const AttentionBackend* b : registered_backends()) {
    Placement p{b, Device::cpu(), ""};
    if (std::optional<std::string> reason = b->unavailable_reason()) {
      p.skipped = *reason;
    } else if (!b->supports_device(DeviceKind::kCPU)) {
      p.device = Device::cuda(0);
      if (cuda_devices().empty()) p.skipped = "no CUDA device";
    }
    out.push_back(p);
  }
  return out;
}

std::vector<double> as_doubles(const TensorView& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = load_as_float(t.data(), t.dtype(), i);
  return v;
}

class Parity : public ::testing::TestWithParam<CaseSpec> {};

// The batch in the order every backend here runs it: each reorder a builder asks for (FLASHINFER's
// decode-first) applied up front, so that every backend gets the same random batch request by
// request (the others take any order) and the runs compare row by row.
StatusOr<CaseSpec> common_order(CaseSpec spec, const std::vector<Placement>& places) {
  for (const Placement& p : places) {
    if (!p.skipped.empty() ||
        !p.backend->validate_configuration(testing::selector_config_for(spec, p.device)).empty()) {
      continue;
    }
    PAGEDATTN_ASSIGN_OR_RETURN(
        std::unique_ptr<AttentionMetadataBuilder> builder,
        p.backend->make_builder(testing::builder_params_for(spec, p.device)));
    if (std::optional<int> threshold = builder->reorder_batch_threshold()) {
      spec = testing::reorder_decode_first(spec, *threshold);
    }
  }
  return spec;
}

TEST_P(Parity, EveryAvailableBackendMatchesTheOracleAndTheOthers) {
  const std::vector<Placement> places = placements();
  StatusOr<CaseSpec> ordered = common_order(GetParam(), places);
  ASSERT_TRUE(ordered.ok()) << ordered.status().to_string();
  const CaseSpec& spec = *ordered;
  std::vector<std::unique_ptr<StepRunner>> runs;
  for (const Placement& p : places) {
    const std::string name(p.backend->name());
    if (!p.skipped.empty()) {
      std::cout << "[ SKIPPED  ] " << name << ": " << p.skipped << "\n";
      continue;
    }
    const std::vector<std::string> reasons =
        p.backend->validate_configuration(testing::selector_config_for(spec, p.device));
    if (!reasons.empty()) {
      std::cout << "[ SKIPPED  ] " << name << " does not serve " << spec.name << ": "
                << reasons.front() << "\n";
      continue;
    }
    testing::StepOptions options;
    options.cascade = testing::CascadeMode::kAlways;
    StatusOr<std::unique_ptr<StepRunner>> run =
        StepRunner::prepare(spec, *p.backend, p.device, *spec.kv_layout, options);
    ASSERT_TRUE(run.ok()) << name << ": " << run.status().to_string();
    Status built = (*run)->build();
    if (!built.ok() && spec.common_prefix_len > 0) {
      // The one cascade contract: a backend whose passes cannot express a feature says so in
      // build(), naming it; the step then runs without cascade.
      EXPECT_EQ(built.code(), StatusCode::kInvalidArgument) << name << ": " << built.to_string();
      EXPECT_NE(built.message().find("cascade"), std::string::npos) << built.to_string();
      options.cascade = testing::CascadeMode::kNever;
      run = StepRunner::prepare(spec, *p.backend, p.device, *spec.kv_layout, options);
      ASSERT_TRUE(run.ok()) << name << ": " << run.status().to_string();
      built = (*run)->build();
    }
    ASSERT_TRUE(built.ok()) << name << ": " << built.to_string();
    ASSERT_TRUE((*run)->placement().poison_outputs().ok());
    const Status executed = (*run)->execute();
    ASSERT_TRUE(executed.ok()) << name << ": " << executed.to_string();
    StatusOr<reference::Comparison> c = (*run)->verify();
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_TRUE(c->pass) << (*run)->backend_label() << " vs oracle on " << spec.name << ": max abs "
                         << c->max_abs_error << "\n"
                         << c->detail;
    runs.push_back(std::move(run).value());
  }
  ASSERT_FALSE(runs.empty()) << "no backend ran " << spec.name;
  // Every pair under the same pass rule, the first backend's result standing in for the oracle.
  const StepRunner& first = *runs.front();
  for (size_t i = 1; i < runs.size(); ++i) {
    ASSERT_EQ(runs[i]->spec().seq_lens, first.spec().seq_lens)
        << runs[i]->backend_label() << " ran the batch in another order than " << first.backend_label();
    ASSERT_EQ(runs[i]->spec().query_lens, first.spec().query_lens);
    const reference::Comparison c = reference::compare_to_reference(
        runs[i]->output().view(), runs[i]->lse().view(), as_doubles(first.output().view()),
        as_doubles(first.lse().view()), reference::tolerance_for(spec.dtype));
    EXPECT_TRUE(c.pass) << runs[i]->backend_label() << " vs " << first.backend_label() << " on "
                        << spec.name << ": max abs " << c.max_abs_error << "\n"
                        << c.detail;
  }
}

INSTANTIATE_TEST_SUITE_P(Batches, Parity, ::testing::ValuesIn(parity_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pagedattn::parity
