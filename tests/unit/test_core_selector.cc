// select_backend: priority, rejection reasons, forced backends, layout and block size, and
// explaining a choice for another machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "backends/factories.h"
#include "pagedattn/device_info.h"
#include "pagedattn/selector.h"

namespace pagedattn {
namespace {

AttentionSelectorConfig model(Device device) {
  AttentionSelectorConfig c;
  c.head_size = 128;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.dtype = DType::kBF16;
  c.kv_cache_dtype = KVCacheDType::kFP8E4M3;
  c.device = device;
  return c;
}

TEST(Selector, Priority) {
  EXPECT_EQ(backend_priority(Device::cuda(0)),
            (std::vector<std::string_view>{"FLASH_ATTN", "FLASHINFER"}));
  EXPECT_EQ(backend_priority(Device::cpu()), (std::vector<std::string_view>{"CPU_ATTN"}));
}

TEST(Selector, CpuDeviceChoosesCpuAttn) {
  AttentionSelectorConfig c = model(Device::cpu());
  c.block_size = 24;
  auto s = select_backend(c);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->backend, &cpu_attn_backend());
  // The GPU backends are explained too, FLASH_ATTN with its block-size reason.
  ASSERT_EQ(s->rejected.size(), 2u);
  EXPECT_EQ(s->rejected[0].backend, "FLASH_ATTN");
  EXPECT_EQ(s->rejected[1].backend, "FLASHINFER");
  const std::vector<std::string>& fa = s->rejected[0].reasons;
  EXPECT_NE(std::find_if(fa.begin(), fa.end(),
                         [](const std::string& r) {
                           return r.find("block_size not supported") != std::string::npos;
                         }),
            fa.end());
  EXPECT_NE(std::find(fa.begin(), fa.end(), "device cpu not supported"), fa.end());
  EXPECT_EQ(s->block_size, 24);
  EXPECT_EQ(s->kv_cache_layout, KVCacheLayout::kNHD);
  c.block_size.reset();
  EXPECT_EQ(select_backend(c)->block_size, 16);
}

// A model no backend can run is refused by the selector itself, not selected and refused by
// make_impl later.
TEST(Selector, HeadCountsMustFormWholeGroups) {
  for (const Device& device : {Device::cpu(), Device::cuda(0)}) {
    AttentionSelectorConfig c = model(device);
    c.compute_capability = ComputeCapability{9, 0};
    for (const auto& [heads, kv_heads] : {std::pair{32, 7}, {32, 0}, {0, 8}, {-8, 8}}) {
      c.num_heads = heads;
      c.num_kv_heads = kv_heads;
      for (const std::optional<std::string_view> forced :
           {std::optional<std::string_view>{}, std::optional<std::string_view>{"cpu"}}) {
        StatusOr<BackendSelection> s = select_backend(c, forced);
        ASSERT_FALSE(s.ok()) << heads << "/" << kv_heads;
        EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
        EXPECT_NE(s.status().message().find(
                      "num_heads = " + std::to_string(heads) +
                      " must be a positive multiple of num_kv_heads = " + std::to_string(kv_heads)),
                  std::string::npos)
            << s.status().message();
      }
    }
  }
}

TEST(Selector, LayoutFollowsTheSetting) {
  set_kv_cache_layout(KVCacheLayout::kHND);
  auto s = select_backend(model(Device::cpu()));
  set_kv_cache_layout(KVCacheLayout::kNHD);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kv_cache_layout, KVCacheLayout::kHND);
}

// Compute capability 9.0 explained on any machine, GPU or not.
TEST(Selector, ExplainHopperChoice) {
  AttentionSelectorConfig c = model(Device::cuda(0));
  c.compute_capability = ComputeCapability{9, 0};
  c.block_size = 16;
  auto s = select_backend(c);
  if (built_with_cuda()) {
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s->backend->name(), "FLASH_ATTN");
    ASSERT_EQ(s->rejected.size(), 1u);  // only CPU_ATTN, which does not run on CUDA
    EXPECT_EQ(s->rejected[0].backend, "CPU_ATTN");
    EXPECT_EQ(s->block_size, 16);
  } else {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    const std::string& m = s.status().message();
    EXPECT_NE(m.find("cuda:0"), std::string::npos) << m;
    EXPECT_NE(m.find("FLASH_ATTN [not built in this version (built without CUDA)]"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("FLASHINFER [not built in this version (built without CUDA)]"),
              std::string::npos)
        << m;
  }
}

TEST(Selector, BlockSize24RejectsFlashAttnWithItsReason) {
  AttentionSelectorConfig c = model(Device::cuda(0));
  c.compute_capability = ComputeCapability{9, 0};
  c.block_size = 24;
  auto s = select_backend(c);
  ASSERT_FALSE(s.ok());  // FLASHINFER takes multiples of 16 too
  EXPECT_NE(s.status().message().find("block_size not supported (24; allowed: multiples of 16)"),
            std::string::npos)
      << s.status().message();
  auto forced = select_backend(c, "flash_attn");
  ASSERT_FALSE(forced.ok());
  EXPECT_EQ(forced.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(forced.status().message().find("selected backend FLASH_ATTN is not valid"),
            std::string::npos);
  EXPECT_NE(forced.status().message().find("block_size not supported (24"), std::string::npos);
}

TEST(Selector, RejectionsAreListedInPriorityOrder) {
  if (!built_with_cuda()) GTEST_SKIP() << "needs FLASH_ATTN built to pass a backend over";
  AttentionSelectorConfig c = model(Device::cuda(0));
  c.compute_capability = ComputeCapability{9, 0};
  auto s = select_backend(c);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->backend->name(), "FLASH_ATTN");
  c.dtype = DType::kF32;
  auto none = select_backend(c);
  ASSERT_FALSE(none.ok());
  const std::string& m = none.status().message();
  EXPECT_LT(m.find("FLASH_ATTN ["), m.find("FLASHINFER ["));
}

TEST(Selector, ForcedBackendNeverFallsBack) {
  // CPU_ATTN could serve this model, but not on a CUDA device.
  AttentionSelectorConfig c = model(Device::cuda(0));
  c.compute_capability = ComputeCapability{8, 0};
  auto s = select_backend(c, "cpu");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("CPU_ATTN"), std::string::npos);
  EXPECT_NE(s.status().message().find("device cuda not supported"), std::string::npos);

  auto fi = select_backend(model(Device::cpu()), "FLASHINFER");
  ASSERT_FALSE(fi.ok());
  if (!built_with_cuda()) {
    EXPECT_NE(fi.status().message().find("not built in this version"), std::string::npos);
  }
  EXPECT_NE(fi.status().message().find("device cpu not supported"), std::string::npos);

  auto ok = select_backend(model(Device::cpu()), "CPU_ATTN");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->backend, &cpu_attn_backend());
}

TEST(Selector, UnknownForcedNameListsKnownNames) {
  auto s = select_backend(model(Device::cpu()), "TRITON_ATTN");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  const std::string& m = s.status().message();
  EXPECT_NE(m.find("'TRITON_ATTN'"), std::string::npos);
  for (const char* name : {"FLASH_ATTN", "FLASHINFER", "CPU_ATTN"}) {
    EXPECT_NE(m.find(name), std::string::npos) << name;
  }
}

TEST(Selector, CpuRejectionReasons) {
  AttentionSelectorConfig c = model(Device::cpu());
  c.head_size = 20;
  c.attn_type = AttentionType::kEncoderDecoder;
  auto s = select_backend(c);
  ASSERT_FALSE(s.ok());
  const std::string& m = s.status().message();
  // The device's candidates first, then the other backends with their own reasons.
  EXPECT_EQ(m.rfind("no attention backend can serve this configuration on cpu: CPU_ATTN [head_size "
                    "not supported (20; allowed: multiples of 8 from 32 to 512); attention type "
                    "encoder_decoder not supported] FLASH_ATTN [",
                    0),
            0u)
      << m;
  EXPECT_NE(m.find("] FLASHINFER ["), std::string::npos) << m;
}

TEST(Selector, CudaWithoutCapabilityUsesTheDevice) {
  AttentionSelectorConfig c = model(Device::cuda(0));
  auto s = select_backend(c);
  const std::vector<CudaDeviceInfo> devices = cuda_devices();
  if (devices.empty()) {
    ASSERT_FALSE(s.ok());
    if (built_with_cuda()) {
      EXPECT_NE(s.status().message().find("compute capability unknown"), std::string::npos);
    }
  } else if (devices[0].capability >= ComputeCapability{8, 0}) {
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s->backend->name(), "FLASH_ATTN");
  }
}

TEST(DeviceInfo, ConsistentWithBuild) {
  const std::vector<CudaDeviceInfo> devices = cuda_devices();
  if (!built_with_cuda()) {
    EXPECT_TRUE(devices.empty());
  }
  EXPECT_EQ(default_device(), devices.empty() ? Device::cpu() : Device::cuda(0));
  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(devices[i].index, static_cast<int>(i));
    EXPECT_FALSE(devices[i].name.empty());
    EXPECT_GT(devices[i].total_memory_bytes, 0);
    EXPECT_GT(devices[i].num_sms, 0);
    EXPECT_GE(devices[i].capability.major, 5);
  }
}

}  // namespace
}  // namespace pagedattn
