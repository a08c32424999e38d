#include "plan/decode_cut_plan.h"

#include <algorithm>

#include "plan/decode_whole_plan.h"

namespace pagedattn::plan::detail {
namespace {

using kernels::DecodeWorkUnit;
using kernels::kDecodeRowsPerTile;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// ceil_div for a >= 0, b > 0 where the planner's hot loop needs it: a 32-bit division when both
// fit (far cheaper than a 64-bit one on x86, and the plan makes several per CTA).
int64_t ceil_div_small(int64_t a, int64_t b) {
  if (((a + b) >> 32) == 0) {
    return (static_cast<uint32_t>(a) + static_cast<uint32_t>(b) - 1) / static_cast<uint32_t>(b);
  }
  return ceil_div(a, b);
}

// Streams units into CTAs: each CTA's budget is the cost not yet assigned over the CTAs left.
class CtaStream {
 public:
  CtaStream(const DecodePlanConfig& config, int64_t total_cost, int32_t* cta_begin,
            DecodeWorkUnit* units, int64_t max_units)
      : c0_(config.unit_overhead_tokens), num_ctas_(config.num_ctas), remaining_(total_cost),
        cta_begin_(cta_begin), units_(units), max_units_(max_units) {
    cta_begin_[0] = 0;
    budget_ = next_budget();
  }

  // The last CTA takes whatever is left.
  bool last_cta() const { return cta_ == num_ctas_ - 1; }
  int64_t room() const { return budget_ - fill_; }
  int64_t fill() const { return fill_; }
  int num_units() const { return static_cast<int>(num_units_); }
  int64_t max_cost() const { return std::max(max_cost_, fill_); }
  DecodeWorkUnit& unit(int i) { return units_[i]; }

  // Appends keys [begin, end) of `base`'s segment to the current CTA; `last` ends the segment (its
  // one pending overhead leaves the unassigned cost).
  bool emit(const DecodeWorkUnit& base, int begin, int end, bool last) {
    if (num_units_ >= max_units_) return false;
    // Field by field: a whole-struct copy of `base`, just written field by field on the stack,
    // reloads it in 16-byte halves that cannot be forwarded from those stores (a ~15-cycle stall
    // per unit, most of the plan's time at 256 requests).
    DecodeWorkUnit& u = units_[num_units_++];
    u.req = base.req;
    u.q_start = base.q_start;
    u.q_len = base.q_len;
    u.kv_len = base.kv_len;
    u.head_row = base.head_row;
    u.kv_begin = begin;
    u.kv_end = end;
    u.partial = -1;
    fill_ += end - begin + c0_;
    remaining_ -= end - begin + (last ? c0_ : 0);
    return true;
  }

  // Whole segments of one row tile (keys [lo, hi) of request `req`), heads h, h + 1, ... of
  // num_kv_heads, while each fits the current CTA (or that is the last): what stream_balanced
  // does for each of them, in one loop over locals, closing CTAs that fill up. Returns the first
  // head not emitted.
  int emit_whole(int req, int q_start, int q_len, int kv_len, int row0, int lo, int hi, int h,
                 int num_kv_heads) {
    const int64_t cost = hi - lo + c0_;
    int64_t n = num_units_;
    int64_t fill = fill_, remaining = remaining_;
    const int64_t max_units = max_units_;
    DecodeWorkUnit* const units = units_;
    while (h < num_kv_heads && n < max_units) {
      const bool last = last_cta();
      if (!last && cost > budget_ - fill) break;
      units[n++] = {req, q_start, q_len, kv_len, kernels::decode_head_row(h, row0), lo, hi, -1};
      fill += cost;
      remaining -= cost;
      ++h;
      if (!last && budget_ - fill <= 0) {
        num_units_ = n;
        fill_ = fill;
        remaining_ = remaining;
        close_cta();
        fill = 0;
      }
    }
    num_units_ = n;
    fill_ = fill;
    remaining_ = remaining;
    return h;
  }

  void close_cta() {
    if (last_cta()) return;
    max_cost_ = std::max(max_cost_, fill_);
    cta_begin_[++cta_] = static_cast<int32_t>(num_units_);
    fill_ = 0;
    budget_ = next_budget();
  }

  void finish() {
    for (int64_t c = cta_ + 1; c <= num_ctas_; ++c) {
      cta_begin_[c] = static_cast<int32_t>(num_units_);
    }
  }

 private:
  // The unassigned cost over the CTAs left, counting the overhead of the cut that each CTA
  // boundary may add: without it the budgets run behind and the last CTA takes the excess.
  int64_t next_budget() const {
    const int64_t left = num_ctas_ - cta_;
    return std::max<int64_t>(1, ceil_div_small(remaining_ + c0_ * (left - 1), left));
  }

  // All 64-bit: the int32 stores into the plan cannot alias them, so the compiler keeps them in
  // registers across the stores instead of reloading them after each one.
  int64_t c0_;
  int64_t num_ctas_;
  int64_t remaining_;  // cost not yet assigned
  int32_t* cta_begin_;
  DecodeWorkUnit* units_;
  int64_t max_units_;
  int64_t cta_ = 0;
  int64_t budget_ = 1;
  int64_t fill_ = 0;
  int64_t max_cost_ = 0;
  int64_t num_units_ = 0;
};

// Balanced mode: cut where the CTA's budget ends, if both sides keep kMinChunkTokens keys.
bool stream_balanced(CtaStream& st, const DecodeWorkUnit& base, int lo, int hi, int64_t c0) {
  int s = lo;
  while (true) {
    const int64_t len = hi - s;
    if (st.last_cta() || len + c0 <= st.room()) {
      if (!st.emit(base, s, hi, true)) return false;
      if (st.room() <= 0) st.close_cta();
      return true;
    }
    // An empty CTA starts equal pieces of about one budget each; a partly filled one takes what
    // fits in its room.
    int64_t cut = s + st.room() - c0;
    if (st.fill() == 0) {
      const int64_t pieces = std::max<int64_t>(2, ceil_div_small(len + c0, st.room()));
      cut = s + std::max<int64_t>(kMinChunkTokens, ceil_div_small(len, pieces));
    }
    const bool piece_ok = cut - s >= kMinChunkTokens;
    if (piece_ok && hi - cut >= kMinChunkTokens) {
      if (!st.emit(base, s, static_cast<int>(cut), false)) return false;
      s = static_cast<int>(cut);
      st.close_cta();
      continue;
    }
    if (piece_ok || st.fill() == 0) {  // what would be left is too short: take it all
      if (!st.emit(base, s, hi, true)) return false;
      if (st.room() <= 0) st.close_cta();
      return true;
    }
    st.close_cta();
  }
}

// Deterministic mode: pieces end at multiples of `chunk` only; each goes whole to a CTA.
bool stream_fixed(CtaStream& st, const DecodeWorkUnit& base, int lo, int hi, int64_t c0,
                  int chunk) {
  for (int s = lo; s < hi;) {
    const int e = std::min<int>(hi, (s / chunk + 1) * chunk);
    if (!st.last_cta() && st.fill() > 0 && e - s + c0 > st.room()) st.close_cta();
    if (!st.emit(base, s, e, true)) return false;  // the total counted each piece's overhead
    if (st.room() <= 0) st.close_cta();
    s = e;
  }
  return true;
}


}  // namespace

Status capacity_error(const std::string& what, int64_t need, int64_t have) {
  return out_of_range("decode plan: " + what + " " + std::to_string(need) +
                      " exceeds the workspace's capacity " + std::to_string(have) +
                      " (sized from max_num_reqs, max_num_tokens and max_model_len)");
}

Status plan_with_cuts(const std::vector<int64_t>& order, std::span<const int32_t> query_start_loc,
                      std::span<const int32_t> seq_lens, const DecodePlanConfig& config,
                      int64_t total, const DecodePlanLimits& limits, DecodePlanScratch& scratch,
                      int32_t* cta_begin, DecodeWorkUnit* units, CutPlan& out) {
  const int group = config.num_heads / config.num_kv_heads;
  const int64_t c0 = config.unit_overhead_tokens;
  int64_t partial_rows = 0;
  CtaStream st(config, total, cta_begin, units, limits.max_units);
  // The loop's inputs in locals: the plan's int32 stores could alias the config, the limits
  // and the input spans, which the loop would otherwise reload after every unit.
  const int num_kv_heads = config.num_kv_heads, window_left = config.window_left;
  const int fixed_chunk = config.fixed_chunk_tokens;
  const int64_t max_partial_rows = limits.max_partial_rows;
  for (const int64_t key : order) {
    const int r = static_cast<int>(key & 0xFFFFFFFF);
    const int q_start = query_start_loc[r], kv_len = seq_lens[r];
    const int q_len = query_start_loc[r + 1] - q_start;
    // A row tile's keys are the same for every KV head: computed once.
    for (int row0 = 0; row0 < q_len * group; row0 += kDecodeRowsPerTile) {
      const int rows = std::min(kDecodeRowsPerTile, q_len * group - row0);
      const KeyRange k = visible_keys(q_len, kv_len, group, row0, rows, window_left);
      for (int h = 0; h < num_kv_heads; ++h) {
        if (fixed_chunk == 0) {
          h = st.emit_whole(r, q_start, q_len, kv_len, row0, k.lo, k.hi, h, num_kv_heads);
          if (h == num_kv_heads) break;
        }
        const DecodeWorkUnit seg{r, q_start, q_len, kv_len, kernels::decode_head_row(h, row0),
                                 0, 0, -1};
        const int first = st.num_units();
        const bool ok = fixed_chunk > 0 ? stream_fixed(st, seg, k.lo, k.hi, c0, fixed_chunk)
                                        : stream_balanced(st, seg, k.lo, k.hi, c0);
        if (!ok) return capacity_error("work units", st.num_units() + 1, limits.max_units);
        const int pieces = st.num_units() - first;
        if (pieces < 2) continue;
        if (partial_rows + int64_t{pieces} * rows > max_partial_rows) {
          return capacity_error("partial rows", partial_rows + int64_t{pieces} * rows,
                                max_partial_rows);
        }
        for (int p = 0; p < pieces; ++p) {
          st.unit(first + p).partial = static_cast<int32_t>(partial_rows + int64_t{p} * rows);
        }
        scratch.merges.push_back({seg.q_start, q_len, seg.head_row,
                                  static_cast<int32_t>(partial_rows), pieces, rows, {0, 0}});
        scratch.merge_units.push_back(first);
        partial_rows += int64_t{pieces} * rows;
      }
    }
  }
  st.finish();
  out.num_units = st.num_units();
  out.max_cost = st.max_cost();
  out.partial_rows = partial_rows;
  return ok_status();
}


}  // namespace pagedattn::plan::detail
