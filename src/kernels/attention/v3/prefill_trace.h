// The v3 prefill kernels' turn trace, host side: its layout (V3Grid::trace; the device side is
// prefill_trace.cuh). Thread 0 of each consumer warpgroup, in the first kTraceCtas CTAs, notes the
// SM clock at each mark of the first kTraceSteps steps of its first work tile, so the consumers'
// turns, waits and softmaxes can be laid side by side (a CTA's consumers read one SM's clock); the
// bf16 kernel's producer notes when each K/V tile's slot came free and when its copy was issued.
#pragma once

namespace pagedattn::kernels::attention::v3 {

inline constexpr int kTraceCtas = 4;
inline constexpr int kTraceSteps = 32;
// A step's marks, in order: its start, K (and V) landed, the turn taken, S issued, P·V issued
// (the turn handed on), S done, the softmax done, P·V done, P packed (the step's end).
enum TraceMark {
  kMarkStart,
  kMarkLoaded,
  kMarkTurn,
  kMarkScoresIssued,
  kMarkIssued,
  kMarkScores,
  kMarkSoftmax,
  kMarkPv,
  kMarkPacked,
  kTraceMarks
};

// The producer's marks for KV tile i of the same work tile (its step row i; the bf16 kernel's
// producer only): K_i's slot free, K_i issued, V_i's slot free, V_i issued.
enum ProducerMark { kMarkKFree, kMarkKIssued, kMarkVFree, kMarkVIssued };

// The trace's length in long longs: [CTA][consumer][step][mark], then the producers'
// [CTA][step][mark].
constexpr int trace_entries(int consumers) {
  return kTraceCtas * (consumers + 1) * kTraceSteps * kTraceMarks;
}

}  // namespace pagedattn::kernels::attention::v3
