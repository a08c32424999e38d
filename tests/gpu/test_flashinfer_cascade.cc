// FLASHINFER cascade (vLLM disables it for FlashInfer; ours runs): the GPU backends' cascade cases
// (backend_grid.h: the shared prefix once, merged by LSE, equal to plain attention, sinks counted
// once), and a cascade the passes cannot express is refused by build().
#include <string>

#include "backend_grid.h"
#include "cuda_test_support.h"
#include "test_flashinfer_support.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;

void expect_flashinfer(const CaseSpec& spec, KVCacheLayout layout) {
  expect_flashinfer_matches_oracle(spec, layout);
}

PAGEDATTN_GPU_CASCADE_GRID(FlashInfer, expect_flashinfer);

TEST(FlashInferCascade, BuildRefusesCascadeWithAWindow) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  CaseSpec s = grid::shared_prefix("cascade_window");
  s.sliding_window = SlidingWindow{100, 0};
  const AttentionBackend* backend = find_backend("FLASHINFER");
  testing::StepOptions options;
  options.cascade = testing::CascadeMode::kAlways;
  auto run = testing::StepRunner::prepare(s, *backend, Device::cuda(0), KVCacheLayout::kNHD,
                                          options);
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  const Status st = (*run)->build();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("sliding window"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace pagedattn::test
