// Status/StatusOr and the small enums: names, parsers, sizes.
#include <gtest/gtest.h>

#include <string>

#include "pagedattn/status.h"
#include "pagedattn/types.h"

namespace pagedattn {
namespace {

StatusOr<int> half_of(int x) {
  if (x % 2 != 0) return invalid_argument("x must be even, got " + std::to_string(x));
  return x / 2;
}

StatusOr<int> quarter_of(int x) {
  PAGEDATTN_ASSIGN_OR_RETURN(int h, half_of(x));
  PAGEDATTN_ASSIGN_OR_RETURN(int q, half_of(h));
  return q;
}

Status check_even(int x) {
  PAGEDATTN_RETURN_IF_ERROR(half_of(x).status());
  return ok_status();
}

TEST(Status, CodesNamesAndMacros) {
  EXPECT_TRUE(Status().ok());
  EXPECT_EQ(Status().to_string(), "OK");
  EXPECT_EQ(invalid_argument("bad").to_string(), "InvalidArgument: bad");
  EXPECT_EQ(unimplemented("u").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(not_found("n").code(), StatusCode::kNotFound);
  EXPECT_EQ(out_of_range("o").code(), StatusCode::kOutOfRange);
  EXPECT_EQ(internal_error("i").code(), StatusCode::kInternal);
  EXPECT_STREQ(status_code_name(StatusCode::kCudaError), "CudaError");
  EXPECT_STREQ(status_code_name(StatusCode::kNotFound), "NotFound");
  EXPECT_EQ(quarter_of(12).value(), 3);
  EXPECT_EQ(quarter_of(6).status().message(), "x must be even, got 3");
  EXPECT_TRUE(check_even(4).ok());
  EXPECT_FALSE(check_even(5).ok());
  StatusOr<int> from_ok{ok_status()};
  EXPECT_FALSE(from_ok.ok());
  EXPECT_EQ(from_ok.status().code(), StatusCode::kInternal);
}

TEST(DType, SizesNamesAndParsing) {
  const struct {
    DType dtype;
    size_t size;
    const char* name;
  } all[] = {{DType::kF32, 4, "f32"},          {DType::kF16, 2, "f16"},
             {DType::kBF16, 2, "bf16"},        {DType::kFP8E4M3, 1, "fp8_e4m3"},
             {DType::kFP8E5M2, 1, "fp8_e5m2"}, {DType::kU8, 1, "u8"},
             {DType::kI32, 4, "i32"},          {DType::kI64, 8, "i64"}};
  for (const auto& d : all) {
    EXPECT_EQ(dtype_size(d.dtype), d.size) << d.name;
    EXPECT_EQ(dtype_name(d.dtype), d.name);
    auto parsed = parse_dtype(d.name);
    ASSERT_TRUE(parsed.ok()) << d.name;
    EXPECT_EQ(*parsed, d.dtype);
  }
  EXPECT_EQ(*parse_dtype("float16"), DType::kF16);
  EXPECT_EQ(*parse_dtype("half"), DType::kF16);
  EXPECT_EQ(*parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(*parse_dtype("float32"), DType::kF32);
  EXPECT_EQ(*parse_dtype("BF16"), DType::kBF16);
  EXPECT_EQ(*parse_dtype("float8_e4m3fn"), DType::kFP8E4M3);
  auto bad = parse_dtype("f13");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("'f13'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("bf16"), std::string::npos);
  EXPECT_TRUE(is_floating(DType::kBF16));
  EXPECT_TRUE(is_floating(DType::kFP8E5M2));
  EXPECT_FALSE(is_floating(DType::kI32));
  EXPECT_TRUE(is_fp8(DType::kFP8E4M3));
  EXPECT_FALSE(is_fp8(DType::kU8));
}

TEST(KVCacheDType, VllmStrings) {
  EXPECT_EQ(*parse_kv_cache_dtype("auto"), KVCacheDType::kAuto);
  EXPECT_EQ(*parse_kv_cache_dtype("float16"), KVCacheDType::kFloat16);
  EXPECT_EQ(*parse_kv_cache_dtype("bfloat16"), KVCacheDType::kBFloat16);
  EXPECT_EQ(*parse_kv_cache_dtype("fp8"), KVCacheDType::kFP8E4M3);
  EXPECT_EQ(*parse_kv_cache_dtype("fp8_e4m3"), KVCacheDType::kFP8E4M3);
  EXPECT_EQ(*parse_kv_cache_dtype("fp8_e5m2"), KVCacheDType::kFP8E5M2);
  auto bad = parse_kv_cache_dtype("nvfp4");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("kv_cache_dtype 'nvfp4'"), std::string::npos);
  EXPECT_EQ(kv_cache_dtype_name(KVCacheDType::kFP8E5M2), "fp8_e5m2");
  EXPECT_EQ(kv_cache_dtype_name(KVCacheDType::kAuto), "auto");
  EXPECT_EQ(kv_cache_storage_dtype(KVCacheDType::kAuto, DType::kBF16), DType::kBF16);
  EXPECT_EQ(kv_cache_storage_dtype(KVCacheDType::kAuto, DType::kF32), DType::kF32);
  EXPECT_EQ(kv_cache_storage_dtype(KVCacheDType::kFloat16, DType::kBF16), DType::kF16);
  EXPECT_EQ(kv_cache_storage_dtype(KVCacheDType::kBFloat16, DType::kF16), DType::kBF16);
  EXPECT_EQ(kv_cache_storage_dtype(KVCacheDType::kFP8E4M3, DType::kBF16), DType::kFP8E4M3);
  EXPECT_EQ(kv_cache_storage_dtype(KVCacheDType::kFP8E5M2, DType::kF16), DType::kFP8E5M2);
  EXPECT_TRUE(is_fp8(KVCacheDType::kFP8E5M2));
  EXPECT_FALSE(is_fp8(KVCacheDType::kBFloat16));
}

TEST(Device, NamesAndEquality) {
  EXPECT_EQ(device_name(Device::cpu()), "cpu");
  EXPECT_EQ(device_name(Device::cuda(3)), "cuda:3");
  EXPECT_EQ(Device::cuda(1), Device::cuda(1));
  EXPECT_FALSE(Device::cuda(1) == Device::cuda(0));
  EXPECT_TRUE(Device::cpu().is_cpu());
  EXPECT_TRUE(Device::cuda().is_cuda());
}

TEST(ComputeCapability, ParseCompareName) {
  auto cc = parse_compute_capability("9.0");
  ASSERT_TRUE(cc.ok());
  EXPECT_EQ(cc->major, 9);
  EXPECT_EQ(cc->minor, 0);
  EXPECT_EQ(cc->as_int(), 90);
  EXPECT_EQ(compute_capability_name(*parse_compute_capability("8.6")), "8.6");
  EXPECT_EQ(parse_compute_capability("12.1")->as_int(), 121);
  EXPECT_LT((ComputeCapability{8, 6}), (ComputeCapability{9, 0}));
  EXPECT_GT((ComputeCapability{8, 0}), (ComputeCapability{7, 5}));
  // 2147483647.9 would overflow as_int() = 10 * major + minor; 100.0 is past any real device.
  for (const char* bad : {"9", "9.", ".0", "x.y", "9.0.1", "-1.0", "9.10", "", "2147483647.9",
                          "100.0", "99999999999.0", "+9.0"}) {
    auto r = parse_compute_capability(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("MAJOR.MINOR"), std::string::npos);
  }
}

TEST(Layout, Names) {
  EXPECT_EQ(kv_cache_layout_name(KVCacheLayout::kNHD), "NHD");
  EXPECT_EQ(kv_cache_layout_name(KVCacheLayout::kHND), "HND");
  EXPECT_EQ(*parse_kv_cache_layout("HND"), KVCacheLayout::kHND);
  EXPECT_EQ(*parse_kv_cache_layout("nhd"), KVCacheLayout::kNHD);
  EXPECT_FALSE(parse_kv_cache_layout("NDH").ok());
}

TEST(AttentionType, VllmNames) {
  for (AttentionType t : {AttentionType::kDecoder, AttentionType::kEncoder,
                          AttentionType::kEncoderOnly, AttentionType::kEncoderDecoder}) {
    EXPECT_EQ(*parse_attention_type(attention_type_name(t)), t);
  }
  EXPECT_EQ(attention_type_name(AttentionType::kEncoderOnly), "encoder_only");
  EXPECT_EQ(attention_type_name(AttentionType::kEncoderDecoder), "encoder_decoder");
  EXPECT_FALSE(parse_attention_type("cross").ok());
}

TEST(SlidingWindow, Enabled) {
  EXPECT_FALSE(SlidingWindow{}.enabled());
  EXPECT_TRUE((SlidingWindow{127, 0}.enabled()));
  EXPECT_TRUE((SlidingWindow{-1, 3}.enabled()));
}

}  // namespace
}  // namespace pagedattn
