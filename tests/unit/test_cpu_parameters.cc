// CPU_ATTN honours or refuses every parameter it is given (issue 39; docs/parameters.md): each
// honoured one changes the result, each refused one is a Status naming it.
#include <gtest/gtest.h>

#include <string>

#include "reference/attention_ref.h"
#include "support/cpu_run.h"
#include "testing/batch_params.h"
#include "testing/host_batch.h"

namespace pagedattn::cpu_test {
namespace {

using testing::CaseSpec;
using testing::HostBatch;

HostBatch make(const CaseSpec& s, KVCacheLayout layout = KVCacheLayout::kNHD) {
  auto b = testing::make_host_batch(s, layout);
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  return std::move(b).value();
}

// Three first prefills (every key is a new token), as an encoder step has.
CaseSpec prefills() {
  CaseSpec s;
  s.seed = 39;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.head_size = 64;
  s.seq_lens = s.query_lens = {12, 30, 5};
  return s;
}

// The run's output and LSE against the oracle of a decoder layer with the mask `causal`, over the
// batch's cache after the run wrote it.
reference::Comparison against_decoder_oracle(const HostBatch& b, const RunResult& r, bool causal) {
  reference::ReferenceInputs in = testing::reference_inputs(b, b.kv_cache.view());
  in.causal = causal;
  const reference::ReferenceOutputs ref = reference::reference_attention(in, b.params).value();
  return reference::compare_to_reference(r.output.view(), r.lse.view(), ref.out, ref.lse,
                                         reference::tolerance_for(b.spec.dtype));
}

// vLLM's FlashAttentionImpl runs encoder and encoder-only layers with causal=False whatever the
// step's metadata says; a decoder layer follows the step.
TEST(CpuParameters, EncoderLayersAreBidirectionalInACausalStep) {
  for (const AttentionType type : {AttentionType::kEncoder, AttentionType::kEncoderOnly}) {
    HostBatch b = make(prefills());
    ASSERT_TRUE(b.spec.causal);
    RunOptions o;
    o.attn_type = type;
    StatusOr<RunResult> r = run_against_reference(b, o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const std::string name(attention_type_name(type));
    EXPECT_TRUE(against_decoder_oracle(b, *r, /*causal=*/false).pass) << name;
    EXPECT_FALSE(against_decoder_oracle(b, *r, /*causal=*/true).pass) << name;
  }
  HostBatch b = make(prefills());
  StatusOr<RunResult> r = run_against_reference(b);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(against_decoder_oracle(b, *r, /*causal=*/true).pass);
  EXPECT_FALSE(against_decoder_oracle(b, *r, /*causal=*/false).pass);
}

}  // namespace
}  // namespace pagedattn::cpu_test
