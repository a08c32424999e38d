// FLASH_ATTN's cascade on the GPU: the GPU backends' cascade cases (backend_grid.h: equal to plain
// attention, sinks counted once, FP8 + HND, split passes), vLLM's rule, and what build() refuses.
#include <memory>
#include <string>
#include <vector>

#include "backend_grid.h"
#include "cuda_test_support.h"
#include "pagedattn/ops.h"
#include "test_flash_attn_support.h"

namespace pagedattn::test {
namespace {

using testing::CaseSpec;
using grid::shared_prefix;

PAGEDATTN_GPU_CASCADE_GRID(FlashAttn, expect_matches_oracle);

TEST(FlashAttnCascade, BuilderFollowsVllmsRule) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  const AttentionBackend* backend = find_backend("FLASH_ATTN");
  ASSERT_NE(backend, nullptr);
  BuilderParams bp;
  bp.num_heads = 32;
  bp.num_kv_heads = 8;
  bp.head_size = 128;
  bp.device = Device::cuda(0);
  StatusOr<std::unique_ptr<AttentionMetadataBuilder>> builder = backend->make_builder(bp);
  ASSERT_TRUE(builder.ok()) << builder.status().to_string();
  const std::vector<int32_t> mixed = {129, 18, 37, 1, 1, 1, 1, 7};
  const std::vector<int32_t> few = {5, 1, 1};
  for (int cpl : {0, 128, 256, 4096}) {
    for (bool alibi : {false, true}) {
      EXPECT_EQ((*builder)->use_cascade_attention(cpl, mixed, 32, 8, alibi, false, false, 132, 1),
                cascade_attention_pays_off(cpl, mixed, 32, 8, alibi, false, false, 132, 1));
    }
  }
  EXPECT_TRUE((*builder)->use_cascade_attention(256, mixed, 32, 8, false, false, false, 132, 1));
  EXPECT_FALSE((*builder)->use_cascade_attention(256, few, 32, 8, false, false, false, 132, 1));
  EXPECT_FALSE((*builder)->use_cascade_attention(256, mixed, 32, 8, false, true, false, 132, 1));
}

// A case's batch on cuda:0 and a FLASH_ATTN builder for it, to ask build() directly.
struct BuildSetup {
  testing::HostBatch batch;
  std::unique_ptr<testing::DeviceBatch> dev;
  std::unique_ptr<AttentionMetadataBuilder> builder;
  StatusOr<std::unique_ptr<AttentionMetadata>> build(int cpl) const {
    return builder->build(cpl, dev->metadata());
  }
};

StatusOr<BuildSetup> setup(const CaseSpec& s) {
  BuildSetup out;
  PAGEDATTN_ASSIGN_OR_RETURN(out.batch, testing::make_host_batch(s, KVCacheLayout::kNHD));
  PAGEDATTN_ASSIGN_OR_RETURN(out.dev, testing::upload_batch(out.batch, 0));
  PAGEDATTN_ASSIGN_OR_RETURN(out.builder,
                             find_backend("FLASH_ATTN")->make_builder(builder_params_for(out.batch)));
  return out;
}

// The one cascade contract: FLASH_ATTN's passes cannot place ALiBi or a window against absolute
// positions, so build() refuses such a prefix, naming the feature (never a wrong result or a
// forward-time error); without the prefix the same step runs.
TEST(FlashAttnCascade, BuildRefusesCascadeWithAlibiOrAWindow) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  for (const char* feature : {"ALiBi", "sliding window"}) {
    CaseSpec s = shared_prefix(std::string("cascade_") + feature);
    if (std::string(feature) == "ALiBi") {
      s.alibi = true;
    } else {
      s.sliding_window = SlidingWindow{300, 0};
    }
    StatusOr<BuildSetup> b = setup(s);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    StatusOr<std::unique_ptr<AttentionMetadata>> refused = b->build(256);
    ASSERT_FALSE(refused.ok()) << feature;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find(feature), std::string::npos)
        << refused.status().message();
    EXPECT_TRUE(b->build(0).ok()) << feature;
  }
}

// A deterministic builder runs no cascade: its rule never asks for one, and build() refuses a
// prefix, naming deterministic.
TEST(FlashAttnCascade, DeterministicBuilderRunsNoCascade) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  StatusOr<testing::HostBatch> batch =
      testing::make_host_batch(shared_prefix("cascade_det"), KVCacheLayout::kNHD);
  ASSERT_TRUE(batch.ok());
  auto dev = testing::upload_batch(*batch, 0);
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  BuilderParams bp = builder_params_for(*batch);
  bp.deterministic = true;
  auto builder = find_backend("FLASH_ATTN")->make_builder(bp);
  ASSERT_TRUE(builder.ok()) << builder.status().to_string();
  const std::vector<int32_t> mixed = {129, 18, 37, 1, 1, 1, 1, 7};
  EXPECT_TRUE(cascade_attention_pays_off(256, mixed, 32, 8, false, false, false, 132, 1));
  EXPECT_FALSE((*builder)->use_cascade_attention(256, mixed, 32, 8, false, false, false, 132, 1));
  auto refused = (*builder)->build(256, (*dev)->metadata());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("common_prefix_len = 256: FLASH_ATTN was built "
                                            "deterministic"),
            std::string::npos)
      << refused.status().message();
  EXPECT_TRUE((*builder)->build(0, (*dev)->metadata()).ok());
}

TEST(FlashAttnCascade, RejectsAPrefixThatHoldsQueryTokens) {
  PAGEDATTN_REQUIRE_CUDA_DEVICE();
  StatusOr<BuildSetup> b = setup(shared_prefix("cascade_bad"));
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  // Request 4 has 256 context tokens: a 272-token prefix would include its query token.
  EXPECT_FALSE(b->build(272).ok());
  EXPECT_FALSE(b->build(250).ok());  // not a block multiple
  EXPECT_TRUE(b->build(256).ok());
}

}  // namespace
}  // namespace pagedattn::test
