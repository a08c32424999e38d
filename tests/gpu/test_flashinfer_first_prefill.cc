// FLASHINFER's first prefills beside a KV cache on the GPU against the float64 oracle: with a
// cache every prefill reads the cache (the paged kernels only, as vLLM's FlashInfer backend does),
// whether forward gets key/value or not. Key/value filled with NaN give the bits of none, so
// they are not read; a CUDA graph of the step holds as many kernels with key/value as without, so
// no ragged kernels start beside the paged ones. (The ragged source itself:
// test_paged_attention_ragged.cc at the kernel level, test_flashinfer_cacheless.cc for encoders
// without a cache.)
#include <string>
#include <vector>

#include "cuda_test_support.h"
#include "flashinfer_manual_step.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

// First prefills (odd lengths) beside a chunked prefill over context, speculative verification,
// decodes (one of a 1-token sequence) and a padding request, decode-first as the runner orders.
CaseSpec first_prefills_and_more(std::string name, uint64_t seed, bool causal) {
  CaseSpec s = small_case(std::move(name), seed, {37, 200, 1, 630, 77, 300, 5000, 3, 40},
                          {1, 200, 1, 130, 77, 4, 1, 3, 0});
  s.causal = causal;
  return testing::reorder_decode_first(s, 1);
}

void expect_oracle(const ManualStep& step, const std::string& what) {
  const reference::Comparison c = step.compare();
  EXPECT_TRUE(c.pass) << what << ": " << c;
}

TEST(FlashInferFirstPrefill, ReadsTheCacheWithOrWithoutKeyValue) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (const bool causal : {true, false}) {
    const CaseSpec s = first_prefills_and_more(causal ? "causal" : "noncausal", 20, causal);
    ManualStep step(s, AttentionType::kDecoder, "FLASHINFER", Device::cuda(0));
    ASSERT_TRUE(step.ready());
    Status st = step.run(StepCache::kUpdated, /*with_new_tokens=*/false);
    ASSERT_TRUE(st.ok()) << st.to_string();
    expect_oracle(step, s.name + " (no key/value)");
    const std::vector<uint8_t> paged_bits = step.output_bytes();
    st = step.run(StepCache::kUpdated, /*with_new_tokens=*/true);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_TRUE(step.output_bytes() == paged_bits) << s.name << " (key/value given)";
    StatusOr<TensorView> nan = step.nan_new_tokens();
    ASSERT_TRUE(nan.ok()) << nan.status().to_string();
    st = step.run(StepCache::kUpdated, *nan, *nan);
    ASSERT_TRUE(st.ok()) << st.to_string();
    expect_oracle(step, s.name + " (NaN key/value)");
    EXPECT_TRUE(step.output_bytes() == paged_bits) << s.name << " (NaN key/value)";
  }
}

// Metadata built for capture (prefill and decode kernels launched whatever the mix), the forward
// captured in a graph with and without key/value: the same kernel nodes, the oracle's result.
TEST(FlashInferFirstPrefill, NoRaggedKernelsWithACache) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (const bool causal : {true, false}) {
    const CaseSpec s =
        first_prefills_and_more(causal ? "graph_causal" : "graph_noncausal", 23, causal);
    ManualStepOptions options;
    options.capture = true;
    ManualStep step(s, AttentionType::kDecoder, "FLASHINFER", Device::cuda(0), options);
    ASSERT_TRUE(step.ready());
    Status st = step.run_in_graph(StepCache::kUpdated, TensorView(), TensorView());
    ASSERT_TRUE(st.ok()) << st.to_string();
    expect_oracle(step, s.name + " (no key/value)");
    const int paged_nodes = step.graph_kernel_nodes();
    EXPECT_GT(paged_nodes, 0) << s.name;
    const std::vector<uint8_t> paged_bits = step.output_bytes();
    const testing::StepOperands& o = step.operands();
    st = step.run_in_graph(StepCache::kUpdated, o.key, o.value);
    ASSERT_TRUE(st.ok()) << st.to_string();
    expect_oracle(step, s.name + " (key/value given)");
    EXPECT_EQ(step.graph_kernel_nodes(), paged_nodes) << s.name;
    EXPECT_TRUE(step.output_bytes() == paged_bits) << s.name;
  }
}

}  // namespace
}  // namespace pagedattn::test
