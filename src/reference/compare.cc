// The pass rule of docs/attention.md, applied to a backend's output and LSE.
#include "reference/compare.h"

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>

#include "common/numeric.h"

namespace pagedattn::reference {
namespace {

constexpr int kMaxReported = 4;

void report(Comparison& c, int& reported, const std::string& line) {
  if (reported++ < kMaxReported) c.detail += line + "\n";
}

std::string format(const char* fmt, double a, double b, double c = 0.0) {
  char buffer[160];
  std::snprintf(buffer, sizeof(buffer), fmt, a, b, c);
  return buffer;
}

}  // namespace

Tolerance tolerance_for(DType query_dtype) {
  switch (query_dtype) {
    case DType::kF32: return {1e-4, 1e-4, 1e-5};
    case DType::kF16: return {5e-3, 5e-3, 2e-3};
    default: return {1.5e-2, 1e-2, 1e-2};
  }
}

Comparison compare_to_reference(const TensorView& output, const TensorView& lse,
                                const std::vector<double>& ref_out,
                                const std::vector<double>& ref_lse, Tolerance tol) {
  Comparison c;
  int reported = 0;
  bool ok = true;
  if (output.rank() != 3 || output.numel() != static_cast<int64_t>(ref_out.size())) {
    c.detail = "output " + output.describe() + " does not match the reference's " +
               std::to_string(ref_out.size()) + " elements\n";
    return c;
  }
  const int64_t num_tokens = output.size(0);
  const int64_t num_heads = output.size(1);
  const int64_t head_size = output.size(2);
  double diff_sq = 0.0;
  double ref_sq = 0.0;
  int64_t non_finite = 0;
  int64_t outside = 0;
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t h = 0; h < num_heads; ++h) {
      for (int64_t d = 0; d < head_size; ++d) {
        const int64_t offset = t * output.stride(0) + h * output.stride(1) + d * output.stride(2);
        const double got = load_as_float(output.data(), output.dtype(), offset);
        const double want = ref_out[(t * num_heads + h) * head_size + d];
        if (!std::isfinite(got)) {
          ++non_finite;
          continue;
        }
        const double err = std::fabs(got - want);
        c.max_abs_error = std::fmax(c.max_abs_error, err);
        diff_sq += err * err;
        ref_sq += want * want;
        if (err > tol.atol + tol.rtol * std::fabs(want)) {
          ++outside;
          report(c, reported,
                 "token " + std::to_string(t) + " head " + std::to_string(h) + " dim " +
                     std::to_string(d) + format(": got %.6g want %.6g", got, want));
        }
      }
    }
  }
  if (non_finite > 0) {
    ok = false;
    c.detail += std::to_string(non_finite) + " output values are not finite\n";
  }
  if (outside > 0) {
    ok = false;
    c.detail += std::to_string(outside) + " outputs outside atol + rtol * |ref|\n";
  }
  c.rel_frobenius = ref_sq > 0.0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
  if (c.rel_frobenius > tol.max_rel_frobenius) {
    ok = false;
    c.detail +=
        format("relative Frobenius error %.3g > %.3g\n", c.rel_frobenius, tol.max_rel_frobenius);
  }

  if (lse.defined()) {
    if (lse.rank() != 2 || lse.size(0) != num_heads || lse.size(1) != num_tokens ||
        ref_lse.size() != static_cast<size_t>(num_heads * num_tokens)) {
      c.detail += "lse " + lse.describe() + " does not match [num_heads, num_tokens]\n";
      c.pass = false;
      return c;
    }
    for (int64_t h = 0; h < num_heads; ++h) {
      for (int64_t t = 0; t < num_tokens; ++t) {
        const double got =
            load_as_float(lse.data(), lse.dtype(), h * lse.stride(0) + t * lse.stride(1));
        const double want = ref_lse[h * num_tokens + t];
        const bool both_empty = std::isinf(want) && std::isinf(got) && got < 0;
        const double err = both_empty ? 0.0 : std::fabs(got - want);
        const double bound = 1e-2 + 1e-3 * (std::isfinite(want) ? std::fabs(want) : 0.0);
        if (!(err <= bound)) {  // NaN fails too
          ok = false;
          report(c, reported,
                 "lse head " + std::to_string(h) + " token " + std::to_string(t) +
                     format(": got %.6g want %.6g", got, want));
        }
        if (std::isfinite(err)) c.max_lse_error = std::fmax(c.max_lse_error, err);
      }
    }
  }
  c.pass = ok;
  return c;
}

std::ostream& operator<<(std::ostream& out, const Comparison& c) {
  return out << "max_abs " << c.max_abs_error << ", rel_frob " << c.rel_frobenius << ", lse "
             << c.max_lse_error << (c.detail.empty() ? "" : "\n") << c.detail;
}

}  // namespace pagedattn::reference
