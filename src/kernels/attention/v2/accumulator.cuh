// A warp's online-softmax state in the v2 paged attention kernel (base 2), as the mainloop
// leaves it for the epilogue.
#pragma once

namespace pagedattn::kernels::attention::v2 {

constexpr float kLog2e = 1.4426950408889634f;

template <typename Cfg>
struct WarpAccum {
  float o[Cfg::kMT][Cfg::kDV / 8][4];  // unnormalized output, C fragments
  float m2[Cfg::kMT][2];               // running max, base 2
  float l[Cfg::kMT][2];                // this thread's partial row sum
};

}  // namespace pagedattn::kernels::attention::v2
