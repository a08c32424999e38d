// The standard benchmark cases. Decode-heavy suites measure KV bandwidth; prefill suites measure
// FLOP rate. GPU sizes follow issue 4; CPU sizes fit a small machine.
#include "bench_suites.h"

#include <algorithm>

#include "kernels/attention/mask.h"

namespace pagedattn::cli {
namespace {

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

}  // namespace

std::vector<testing::CaseSpec> bench_suite(const std::string& suite, DeviceKind device,
                                           bool quick) {
  const bool gpu = device == DeviceKind::kCUDA;
  const int q = quick ? 4 : 1;  // quick runs shrink contexts by 4
  std::vector<testing::CaseSpec> out;
  auto want = [&](const char* name) { return suite == name || suite == "all"; };
  if (want("decode")) {
    if (gpu) {
      out.push_back(decode(64, 4096 / q));
    } else {
      out.push_back(decode(32, 2048 / q));  // the standard decode case of issue 3
      if (!quick) out.push_back(decode(8, 8192));
    }
  }
  if (want("prefill")) {
    const int tokens = gpu ? 8192 / q : 1024 / q;
    out.push_back(prefill(tokens, false));
    out.push_back(prefill(tokens, true));
  }
  if (want("mixed")) {
    out.push_back(gpu ? mixed(64, 4096 / q, 2048, 2048) : mixed(16, 2048 / q, 256, 768));
  }
  if (want("cascade")) {
    out.push_back(gpu ? cascade(64, 2048 / q, 512) : cascade(32, 1024 / q, 256));
  }
  if (want("fp8")) {
    testing::CaseSpec s = gpu ? decode(64, 4096 / q) : decode(32, 2048 / q);
    s.name = "fp8_e4m3_" + s.name;
    s.kv_cache_dtype = KVCacheDType::kFP8E4M3;
    out.push_back(s);
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
    out.push_back(s);
  }
  return out;
}

CaseWork case_work(const testing::CaseSpec& spec) {
  CaseWork w;
  w.tokens = spec.num_tokens();
  const kernels::attention::MaskRule rule{spec.causal,
                                          spec.sliding_window ? spec.sliding_window->left : -1,
                                          spec.sliding_window ? spec.sliding_window->right : -1};
  const double kv_elem =
      static_cast<double>(dtype_size(kv_cache_storage_dtype(spec.kv_cache_dtype, spec.dtype)));
  double pairs = 0.0;
  for (int r = 0; r < spec.num_reqs(); ++r) {
    const int seq = spec.seq_lens[r], q = spec.query_lens[r];
    int64_t first = seq, last = -1;
    for (int i = 0; i < q; ++i) {
      const auto [lo, hi] = kernels::attention::visible_keys<int64_t>(rule, seq, seq - q + i);
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
