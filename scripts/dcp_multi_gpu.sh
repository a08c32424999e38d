#!/usr/bin/env bash
# Decode context parallelism across processes: starts N processes of tests/multi_gpu's program,
# rank r seeing only GPU r, each one rank of an NCCL group: every collective against in-process
# ranks, and FLASH_ATTN and FLASHINFER under DCP against N = 1 and the oracle, rank by rank.
# Needs N >= 2 GPUs on one host; with fewer it says so and exits 0 without running anything.
#
#   scripts/dcp_multi_gpu.sh [N] [program]   N defaults to every GPU, program to the staged
#                                            .device/bin/pagedattn_multi_gpu_tests
# NCCL comes from the machine (libnccl.so.2 on the library path; scripts/gpu_run.sh adds PyTorch's).
set -uo pipefail
cd "$(dirname "$0")/.."
gpus=$(nvidia-smi --list-gpus 2>/dev/null | wc -l)
n=${1:-$gpus}
program=${2:-.device/bin/pagedattn_multi_gpu_tests}
if ((n < 2 || gpus < n)); then
  echo "dcp_multi_gpu: skipped: $n ranks asked, $gpus GPU(s) here; a group needs 2 or more GPUs"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pids=()
for ((r = 0; r < n; ++r)); do
  CUDA_VISIBLE_DEVICES=$r PAGEDATTN_RANK=$r PAGEDATTN_WORLD_SIZE=$n \
    PAGEDATTN_RENDEZVOUS_FILE=$work/nccl_id \
    timeout 300 "$program" >"$work/rank$r.log" 2>&1 &
  pids+=($!)
done
failed=0
for ((r = 0; r < n; ++r)); do
  if wait "${pids[$r]}"; then
    echo "dcp_multi_gpu: rank $r of $n passed"
  else
    echo "dcp_multi_gpu: rank $r of $n FAILED (rc $?):"
    grep -E 'Failure|FAILED|error|Expected' "$work/rank$r.log" | head -20
    failed=1
  fi
done
exit $failed
