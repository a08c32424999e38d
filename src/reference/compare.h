// The pass rule every test and `check` use (docs/attention.md, "The pass rule"): each element
// within atol + rtol * |ref|, the relative Frobenius error within a bound, everything finite, and
// the LSE within 1e-2 + 1e-3 * |ref| (both -inf counts as equal).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "pagedattn/tensor.h"
#include "pagedattn/types.h"

namespace pagedattn::reference {

struct Tolerance {
  double atol;
  double rtol;
  double max_rel_frobenius;
};
Tolerance tolerance_for(DType query_dtype);  // f32 (1e-4,1e-4,1e-5) f16 (5e-3,5e-3,2e-3) bf16 (1.5e-2,1e-2,1e-2)

struct Comparison {
  bool pass = false;
  double max_abs_error = 0.0;
  double rel_frobenius = 0.0;
  double max_lse_error = 0.0;
  std::string detail;  // first failures, human readable
};
// "max_abs X, rel_frob Y, lse Z" and the detail on the lines below, for test messages.
std::ostream& operator<<(std::ostream& out, const Comparison& c);

// output: host [T, Hq, D] any float dtype; lse: host [Hq, T] f32 or undefined.
Comparison compare_to_reference(const TensorView& output, const TensorView& lse,
                                const std::vector<double>& ref_out, const std::vector<double>& ref_lse,
                                Tolerance tol);

}  // namespace pagedattn::reference
