#!/usr/bin/env bash
# Starts N processes, rank r on GPU r, of a pagedattn program whose tests are one rank of an NCCL
# group (tests/multi_gpu/), and reports each rank. Needs N >= 2 GPUs on one host; with fewer it
# says so and exits 0 without running anything.
#
#   scripts/nccl_ranks.sh [N] [program]   N defaults to every GPU, program to the staged
#                                         .device/bin/pagedattn_nccl_rank_tests
# NCCL comes from the machine (libnccl.so.2 on the library path; scripts/gpu_run.sh adds PyTorch's).
set -uo pipefail
cd "$(dirname "$0")/.."
gpus=$(nvidia-smi --list-gpus 2>/dev/null | wc -l)
n=${1:-$gpus}
program=${2:-.device/bin/pagedattn_nccl_rank_tests}
if ((n < 2 || gpus < n)); then
  echo "nccl_ranks: skipped: $n ranks asked, $gpus GPU(s) here; a group needs 2 or more GPUs"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pids=()
for ((r = 0; r < n; ++r)); do
  PAGEDATTN_RANK=$r PAGEDATTN_WORLD_SIZE=$n PAGEDATTN_RENDEZVOUS_FILE=$work/nccl_id \
    timeout 300 "$program" >"$work/rank$r.log" 2>&1 &
  pids+=($!)
done
failed=0
for ((r = 0; r < n; ++r)); do
  if wait "${pids[$r]}"; then
    echo "nccl_ranks: rank $r of $n passed"
  else
    echo "nccl_ranks: rank $r of $n FAILED (rc $?):"
    grep -E 'Failure|FAILED|error|Expected' "$work/rank$r.log" | head -20
    failed=1
  fi
done
exit $failed
