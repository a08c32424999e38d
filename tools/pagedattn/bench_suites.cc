// The benchmark cases. Decode-heavy suites measure KV bandwidth; prefill suites measure FLOP
// rate. GPU sizes follow issue 4; CPU sizes fit a small machine; the standard suite has the peer
// tool's shapes on every device.
#include "bench_suites.h"

#include <algorithm>

#include "common/mask.h"

namespace pagedattn::cli {
namespace {

// A case with what it measures (BenchCase is an aggregate; this names the defaults).
BenchCase timed(testing::CaseSpec spec, Measure measure = Measure::kForward,
                std::string part_of = "") {
  return {std::move(spec), measure, std::move(part_of)};
}

testing::CaseSpec base(const std::string& name) {
  testing::CaseSpec s;  // 32 query heads, 8 KV heads, head size 128, bf16, block 16
  s.name = name;
  s.seed = 1;
  return s;
}

std::string str(int x) {
  return std::to_string(x);
}

testing::CaseSpec decode(int requests, int context) {
  testing::CaseSpec s = base("decode_" + str(requests) + "x" + str(context));
  s.seq_lens.assign(requests, context);
  s.query_lens.assign(requests, 1);
  return s;
}

testing::CaseSpec prefill(int tokens, bool causal) {
  testing::CaseSpec s = base("prefill_1x" + str(tokens) + (causal ? "_causal" : "_noncausal"));
  s.seq_lens = {tokens};
  s.query_lens = {tokens};
  s.causal = causal;
  return s;
}

// `decodes` single-token requests over `context` plus one chunk of `chunk` tokens after `done`.
testing::CaseSpec mixed(int decodes, int context, int chunk, int done) {
  testing::CaseSpec s = decode(decodes, context);
  s.name = "mixed_" + str(decodes) + "x" + str(context) + "+chunk" + str(chunk) + "@" + str(done);
  s.seq_lens.push_back(done + chunk);
  s.query_lens.push_back(chunk);
  return s;
}

// Requests sharing a prompt of `prefix` tokens (the same blocks), each with `own` more.
testing::CaseSpec cascade(int requests, int prefix, int own) {
  testing::CaseSpec s = decode(requests, prefix + own);
  s.name = "cascade_" + str(requests) + "x(" + str(prefix) + "+" + str(own) + ")";
  s.common_prefix_len = prefix;
  return s;
}

// `requests` decodes with contexts spread evenly over [lo, hi].
testing::CaseSpec spread_decode(const std::string& what, int requests, int lo, int hi) {
  testing::CaseSpec s = base(what + "_decode_" + str(requests) + "x" + str(lo) + "-" + str(hi));
  for (int r = 0; r < requests; ++r) {
    s.seq_lens.push_back(lo + static_cast<int>(int64_t{r} * (hi - lo) / std::max(1, requests - 1)));
    s.query_lens.push_back(1);
  }
  return s;
}

// The shapes of peer_sdpa.py --suite standard: (batch, seq or context, q heads, kv heads, size).
struct PeerShape {
  int batch, seq, num_heads, num_kv_heads, head_size;
};
constexpr PeerShape kStandardPrefill[] = {{1, 8192, 32, 8, 128},
                                          {4, 2048, 32, 8, 128},
                                          {16, 512, 32, 8, 128},
                                          {1, 8192, 32, 8, 64},
                                          {1, 8192, 16, 4, 256}};
constexpr PeerShape kStandardDecode[] = {{64, 4096, 32, 8, 128},
                                         {256, 2048, 32, 8, 128},
                                         {8, 32768, 32, 8, 128},
                                         {128, 1024, 64, 8, 128},
                                         {32, 8192, 32, 32, 128}};
// Prefill reads whole pages per KV tile at this block size (the v3 kernels' TMA path).
constexpr int kStandardPrefillBlock = 128;

testing::CaseSpec with_heads(testing::CaseSpec s, const PeerShape& p) {
  s.num_heads = p.num_heads;
  s.num_kv_heads = p.num_kv_heads;
  s.head_size = p.head_size;
  return s;
}

std::string heads_tag(const PeerShape& p) {
  return "_h" + str(p.num_heads) + "-" + str(p.num_kv_heads) + "_d" + str(p.head_size);
}

// Every shape at the peer's sizes (`shrink` divides the lengths, for quick runs): each prefill
// non-causal then causal (as the peer orders them), then the decodes.
void add_standard(std::vector<BenchCase>& out, int shrink) {
  for (const PeerShape& p : kStandardPrefill) {
    const int seq = std::max(1, p.seq / shrink);
    for (const bool causal : {false, true}) {
      testing::CaseSpec s = with_heads(base("prefill_" + str(p.batch) + "x" + str(seq) +
                                            heads_tag(p) + (causal ? "_causal" : "_noncausal")),
                                       p);
      s.seq_lens.assign(p.batch, seq);
      s.query_lens.assign(p.batch, seq);
      s.causal = causal;
      s.block_size = kStandardPrefillBlock;
      out.push_back(timed(s));
    }
  }
  for (const PeerShape& p : kStandardDecode) {
    const int context = std::max(1, p.seq / shrink);
    testing::CaseSpec s = with_heads(decode(p.batch, context), p);
    s.name += heads_tag(p);
    out.push_back(timed(s));
  }
}

// The overheads issue 9 asks about: a mixed batch against its two parts timed alone, the host time
// of one forward call (one layer) on a small decode batch, and build() for 16, 256 and 1024
// requests.
void add_overhead(std::vector<BenchCase>& out, bool gpu, int q) {
  const int decodes = gpu ? 64 : 16, context = (gpu ? 4096 : 2048) / q;
  const int chunk = gpu ? 2048 : 256, done = gpu ? 2048 : 768;
  const testing::CaseSpec batch = mixed(decodes, context, chunk, done);
  out.push_back(timed(batch));
  out.push_back(timed(decode(decodes, context), Measure::kForward, batch.name));
  testing::CaseSpec alone = base("chunk" + str(chunk) + "@" + str(done));
  alone.seq_lens = {done + chunk};
  alone.query_lens = {chunk};
  out.push_back(timed(alone, Measure::kForward, batch.name));
  testing::CaseSpec small = decode(4, 256);
  small.name = "launch_" + small.name;
  out.push_back(timed(small, Measure::kLaunch));
  for (const int requests : {16, 256, 1024}) {
    out.push_back(timed(spread_decode("build", requests, gpu ? 64 : 16, (gpu ? 512 : 64) / q),
                        Measure::kBuild));
  }
}

}  // namespace

std::vector<BenchCase> bench_suite(const std::string& suite, DeviceKind device, bool quick,
                                   const std::vector<int>& block_sizes) {
  const bool gpu = device == DeviceKind::kCUDA;
  const int q = quick ? 4 : 1;  // quick runs shrink contexts by 4
  std::vector<BenchCase> out;
  auto want = [&](const char* name) { return suite == name || suite == "all"; };
  if (want("decode")) {
    if (gpu) {
      out.push_back(timed(decode(64, 4096 / q)));
    } else {
      out.push_back(timed(decode(32, 2048 / q)));  // the standard decode case of issue 3
      if (!quick) out.push_back(timed(decode(8, 8192)));
    }
  }
  if (want("prefill")) {
    const int tokens = gpu ? 8192 / q : 1024 / q;
    out.push_back(timed(prefill(tokens, false)));
    out.push_back(timed(prefill(tokens, true)));
  }
  if (want("mixed")) {
    out.push_back(timed(gpu ? mixed(64, 4096 / q, 2048, 2048) : mixed(16, 2048 / q, 256, 768)));
  }
  if (want("cascade")) {
    out.push_back(timed(gpu ? cascade(64, 2048 / q, 512) : cascade(32, 1024 / q, 256)));
  }
  if (want("fp8")) {
    testing::CaseSpec s = gpu ? decode(64, 4096 / q) : decode(32, 2048 / q);
    s.name = "fp8_e4m3_" + s.name;
    s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
    out.push_back(timed(s));
  }
  if (want("spec-verify")) {
    // Speculative decoding verification: 4 query tokens per request over long contexts.
    const int requests = gpu ? 32 : 8, lo = (gpu ? 8192 : 2048) / q;
    testing::CaseSpec s =
        base("spec_verify_" + str(requests) + "x4_" + str(lo) + "-" + str(2 * lo));
    for (int r = 0; r < requests; ++r) {
      s.seq_lens.push_back(lo + r * lo / (requests - 1));
      s.query_lens.push_back(4);
    }
    out.push_back(timed(s));
  }
  if (suite == "fp8-prefill") {
    // V3Fp8Bench's shapes (32/8 heads at D 128, 16/4 at D 256) over an e4m3 cache at pages of 128:
    // the v3 FP8 kernel with --fp8-tensor-cores, the cache converted to 16 bits without.
    const int tokens = gpu ? 8192 / q : 1024 / q;
    for (const int d : {128, 256}) {
      for (const bool causal : {false, true}) {
        testing::CaseSpec s = prefill(tokens, causal);
        s.name = "fp8_e4m3_" + s.name + "_d" + str(d);
        s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
        s.block_size = 128;
        s.head_size = d;
        s.num_heads = d == 128 ? 32 : 16;
        s.num_kv_heads = d == 128 ? 8 : 4;
        out.push_back(timed(s));
      }
    }
  }
  if (suite == "standard") add_standard(out, quick ? 16 : 1);
  if (suite == "overhead") add_overhead(out, gpu, q);
  if (block_sizes.empty()) return out;
  std::vector<BenchCase> sized;
  for (const BenchCase& c : out) {
    for (const int block_size : block_sizes) {
      BenchCase copy = c;
      copy.spec.block_size = block_size;
      sized.push_back(copy);
    }
  }
  return sized;
}

CaseShape case_shape(const testing::CaseSpec& spec) {
  CaseShape shape;
  shape.batch = spec.num_reqs();
  shape.num_heads = spec.num_heads;
  shape.num_kv_heads = spec.num_kv_heads;
  shape.head_size = spec.head_size;
  bool prefill = true, decode = true;
  for (int r = 0; r < spec.num_reqs(); ++r) {
    shape.seq = std::max(shape.seq, spec.seq_lens[r]);
    prefill = prefill && spec.query_lens[r] == spec.seq_lens[r];
    decode = decode && spec.query_lens[r] == 1;
  }
  shape.kind = prefill ? "prefill" : decode ? "decode" : "mixed";
  return shape;
}

CaseWork case_work(const testing::CaseSpec& spec) {
  CaseWork w;
  w.tokens = spec.num_tokens();
  const mask::MaskRule rule{spec.causal,
                                          spec.sliding_window ? spec.sliding_window->left : -1,
                                          spec.sliding_window ? spec.sliding_window->right : -1};
  const double kv_elem =
      static_cast<double>(dtype_size(kv_cache_storage_dtype(spec.kv_cache_dtype, spec.dtype)));
  double pairs = 0.0;
  for (int r = 0; r < spec.num_reqs(); ++r) {
    const int seq = spec.seq_lens[r], q = spec.query_lens[r];
    int64_t first = seq, last = -1;
    for (int i = 0; i < q; ++i) {
      const auto [lo, hi] = mask::visible_keys<int64_t>(rule, seq, seq - q + i);
      if (hi < lo) continue;
      pairs += static_cast<double>(hi - lo + 1);
      first = std::min(first, lo);
      last = std::max(last, hi);
    }
    // The shared prefix's blocks are the same memory for every request: count them once.
    if (r > 0) first = std::max<int64_t>(first, spec.common_prefix_len);
    if (last >= first) {
      w.kv_bytes += static_cast<double>(last - first + 1) * 2.0 * spec.num_kv_heads *
                    spec.head_size * kv_elem;
    }
  }
  w.flops = 4.0 * spec.head_size * spec.num_heads * pairs;
  return w;
}

}  // namespace pagedattn::cli
