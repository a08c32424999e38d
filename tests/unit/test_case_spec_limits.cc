// Case files a careless or hostile user might write: each is refused with one message naming the
// field, the value and what is allowed (never a crash, never a silently different case).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "testing/case_spec.h"

namespace pagedattn::testing {
namespace {

const std::string kBase = R"("seq_lens": [40, 7], "query_lens": [3, 7])";

// `fields` is added to a valid case; the parse must fail with `needle` in the message.
void expect_refused(const std::string& fields, const std::string& needle) {
  const std::string text = "{" + kBase + (fields.empty() ? "" : ", " + fields) + "}";
  StatusOr<CaseSpec> spec = parse_case_json(text, "probe");
  ASSERT_FALSE(spec.ok()) << "accepted: " << text.substr(0, 200);
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find(needle), std::string::npos) << spec.status().message();
  EXPECT_LT(spec.status().message().size(), 600u) << "messages clip the values they echo";
}

TEST(CaseSpecLimits, NumbersPastDoubleRange) {
  expect_refused(R"("scale": 1e400)", "out of range");
  expect_refused(R"("logits_soft_cap": 1e400)", "out of range");
  expect_refused(R"("logits_soft_cap": -1e400)", "out of range");
  expect_refused(R"("seed": )" + std::string(100000, '9'), "out of range");
  expect_refused(R"("num_heads": )" + std::string(100000, '9'), "characters)");
  expect_refused(R"("scale": 0)",
                 "'scale' = 0: expected a number in [1.1754944e-38, 3.4028235e+38]");
  expect_refused(R"("scale": -2.5)", "'scale' = -2.5");
  expect_refused(R"("scale": 1e-400)", "'scale'");  // underflows to 0
  // Backends take scale and cap as float: 1e300 would be inf, 1e-45 would be 0 (= the default).
  expect_refused(R"("scale": 1e300)", "float's normal range");
  expect_refused(R"("scale": 1e-45)", "float's normal range");
  expect_refused(R"("logits_soft_cap": 1e-45)",
                 "'logits_soft_cap' = 1e-45: expected 0 (off), a number");
  expect_refused(R"("logits_soft_cap": 1e39)", "'logits_soft_cap'");
  expect_refused(R"("logits_soft_cap": -1)", "'logits_soft_cap' = -1: expected 0 (off), a number");
  EXPECT_TRUE(parse_case_json("{" + kBase + R"(, "logits_soft_cap": 0, "scale": 3e38})", "x").ok());
  expect_refused(R"("scale": NaN)", "not valid JSON");
}

TEST(CaseSpecLimits, IntegersAreRangeCheckedBeforeNarrowing) {
  expect_refused(R"("num_heads": 4294967328)",
                 "'num_heads' = 4294967328: expected an integer in [1, 65536]");
  expect_refused(R"("num_kv_heads": -8)", "'num_kv_heads' = -8");
  expect_refused(R"("head_size": 128.0)", "'head_size' = 128.0: expected an integer");
  expect_refused(R"("block_size": true)", "'block_size' = true");
  expect_refused(R"("block_size": 18446744073709551615)", "'block_size'");
  expect_refused(R"("sliding_window": [4294967296, 0])", "'sliding_window' = [4294967296,0]");
  expect_refused(R"("sliding_window": [-2, 0])", "'sliding_window'");
  expect_refused(R"("common_prefix_len": 4294967312)", "'common_prefix_len' = 4294967312");
  expect_refused(R"("seed": -1)", "'seed' = -1: expected an integer in [0, 2^64 - 1]");
  expect_refused(R"("seed": 1.5)", "'seed' = 1.5");
  expect_refused(R"("num_blocks": 1000000000000)",
                 "'num_blocks' = 1000000000000: expected an integer in [1, 2147483647]");
  StatusOr<CaseSpec> list =
      parse_case_json(R"({"seq_lens": [40, 4294967297], "query_lens": [1, 1]})", "x");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find(
                "'seq_lens[1]' = 4294967297: expected an integer in [0, 1073741824]"),
            std::string::npos)
      << list.status().message();
  // The largest values that fit are still taken exactly.
  StatusOr<CaseSpec> seed =
      parse_case_json("{" + kBase + R"(, "seed": 18446744073709551615})", "x");
  ASSERT_TRUE(seed.ok()) << seed.status().to_string();
  EXPECT_EQ(seed->seed, 18446744073709551615ull);
}

TEST(CaseSpecLimits, DuplicateKeysAndDeepNesting) {
  expect_refused(R"("num_heads": 8, "num_heads": 16)", "duplicate key 'num_heads'");
  expect_refused(R"("seq_lens": [8])", "duplicate key 'seq_lens'");
  expect_refused(R"("name": {"a": 1, "a": 2})", "duplicate key 'a'");
  // 100000 nested arrays in a field whose error message would echo the value.
  expect_refused(R"("name": )" + std::string(100000, '[') + std::string(100000, ']'),
                 "nested deeper than 8 levels");
  expect_refused(R"("name": )" + std::string(9, '[') + std::string(9, ']'), "nested deeper");
  expect_refused(R"("name": [[[]]])", "'name' = [[[]]]: expected a string");
  expect_refused(R"("name": ")" + std::string(300, 'n') + "\"", "at most 256 bytes");
  expect_refused(R"("c)" + std::string(5000, 'o') + R"(lour": 1)", "characters)");
}

TEST(CaseSpecLimits, SizesAreRefusedBeforeAllocating) {
  StatusOr<CaseSpec> tokens =
      parse_case_json(R"({"seq_lens": [1000000000], "query_lens": [1000000000]})", "x");
  ASSERT_FALSE(tokens.ok());
  EXPECT_NE(tokens.status().message().find("MiB of host memory"), std::string::npos)
      << tokens.status().message();
  StatusOr<CaseSpec> sum = parse_case_json(
      R"({"seq_lens": [1073741824, 1073741824, 1073741824], "query_lens": [1073741824, 1073741824, 1073741824]})",
      "x");
  ASSERT_FALSE(sum.ok());
  EXPECT_NE(sum.status().message().find("query_lens sum to 3221225472 tokens"), std::string::npos)
      << sum.status().message();
  StatusOr<CaseSpec> blocks = parse_case_json(
      R"({"seq_lens": [1073741824, 1073741824, 1073741824], "query_lens": [1, 1, 1], "block_size": 1})",
      "x");
  ASSERT_FALSE(blocks.ok());
  EXPECT_NE(blocks.status().message().find("needs 3221225472 blocks"), std::string::npos)
      << blocks.status().message();
  // Sizes whose product overflows int64 are an error too (heads x head size x tokens).
  CaseSpec spec;
  spec.seq_lens = {1 << 30};
  spec.query_lens = {1 << 30};
  spec.num_heads = spec.num_kv_heads = 1 << 30;
  spec.head_size = 1 << 30;
  EXPECT_FALSE(spec.host_bytes().ok());
  EXPECT_FALSE(spec.validate().ok());
  std::string many = R"({"seq_lens": [)";
  for (int i = 0; i < 70000; ++i) many += i ? ",1" : "1";
  StatusOr<CaseSpec> list = parse_case_json(many + R"(], "query_lens": [1]})", "x");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("at most 65536 integers"), std::string::npos);
}

TEST(CaseSpecLimits, FieldsThatWouldBeIgnored) {
  expect_refused(R"("kv_scale": "head")", "'kv_scale' = \"head\": per-head scales need an FP8");
  EXPECT_TRUE(
      parse_case_json("{" + kBase + R"(, "kv_scale": "head", "kv_cache_dtype": "fp8_e5m2"})", "x")
          .ok());
}

TEST(CaseSpecLimits, FilesThatAreNotCases) {
  auto message = [](const std::string& path) { return load_case_file(path).status().message(); };
  EXPECT_NE(message("/tmp").find("is a directory"), std::string::npos) << message("/tmp");
  EXPECT_NE(message("/nonexistent/case.json").find("does not exist"), std::string::npos);
  const std::string loop = ::testing::TempDir() + "/pagedattn_loop.json";
  std::remove(loop.c_str());
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0);
  EXPECT_NE(message(loop).find("symbolic links"), std::string::npos) << message(loop);
  std::remove(loop.c_str());
  EXPECT_NE(message("/dev/zero").find("larger than 1048576 bytes"), std::string::npos)
      << message("/dev/zero");
  const std::string big = ::testing::TempDir() + "/pagedattn_big_case.json";
  {
    std::ofstream out(big);
    out << "{" << kBase << ", \"name\": \"" << std::string(kMaxCaseFileBytes, 'x') << "\"}";
  }
  EXPECT_NE(message(big).find("larger than"), std::string::npos);
  std::remove(big.c_str());
  const std::string empty = ::testing::TempDir() + "/pagedattn_empty_case.json";
  std::ofstream(empty).close();
  EXPECT_NE(message(empty).find("not valid JSON"), std::string::npos) << message(empty);
  if (::geteuid() != 0) {  // root reads anything
    ::chmod(empty.c_str(), 0);
    EXPECT_NE(message(empty).find("Permission denied"), std::string::npos) << message(empty);
  }
  std::remove(empty.c_str());
}

}  // namespace
}  // namespace pagedattn::testing
