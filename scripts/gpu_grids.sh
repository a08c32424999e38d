#!/usr/bin/env bash
# Runs ON THE GPU MACHINE (with .device carried): the peers' full conformance grids (issue 34) in one
# device call. PAGEDATTN_FULL_GRID=1 with SHARDS interleaved shares of each of the two suites, all side
# by side, plus, with MEMCHECK=1, compute-sanitizer memcheck over the grids that place K and V at
# adversarial distances. Everything is bounded so that the results are packed by DEADLINE seconds
# (the device call's own limit must be larger); a suite cut short still reports the cases it passed.
#   run(command="DEADLINE=480 bash scripts/gpu_grids.sh", carry=[".device"], timeout_s=540)
# $OUT gets summary.txt and results.tgz (every suite's log).
set -uo pipefail
cd "$(dirname "$0")/.."
FINAL=${OUT:-$PWD/out}
WORK=$(mktemp -d)
DEADLINE=${DEADLINE:-480}
SHARDS=${SHARDS:-4}
mkdir -p "$FINAL"
# The stage unpacked and the Python module built once, before the parallel runs share them.
source scripts/stage_unpack.sh && unpack_stage "${STAGE:-$PWD/.device}"
export MODULE_DIR=$WORK/module
OUT=$WORK/module TESTS=none bash scripts/gpu_python.sh >"$WORK/module.out" 2>&1
left=$((DEADLINE - SECONDS - 20))  # the packing's margin
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} SUITE_TIMEOUT=$((left - 10))
# FlashInfer's suite: its GPU tests, each its own run per share (the decode grid alone took a share's
# 400 s when they ran one after another; the paged-prefill grid holds 18432 cases). Its CPU grids,
# hours on a core, are CI's and scripts/test.sh's.
FI_GPU="BatchDecode.test_grid_on_the_gpu BatchPrefillPaged.test_grid_on_the_gpu
  BatchPrefillPaged.test_page_sizes_from_1_to_1024_on_the_gpu CudaGraphBuffers"
grid_run() {  # name, share, tests
  OUT=$WORK/$1_$2 PAGEDATTN_FULL_GRID=1 PAGEDATTN_GRID_SHARD=$2/$SHARDS TESTS="$3" \
    timeout "$left" bash scripts/gpu_python.sh >"$WORK/$1_$2.out" 2>&1 &
}
for ((i = 0; i < SHARDS; ++i)); do
  grid_run test_conformance_vllm "$i" test_conformance_vllm
  for t in $FI_GPU; do
    grid_run "flashinfer_${t//./_}" "$i" "test_conformance_flashinfer.$t"
  done
done
if [[ -n ${MEMCHECK:-} ]]; then
  OUT=$WORK/memcheck WRAP="compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20" \
    TESTS="test_conformance_vllm.KAndVAtAnyDistance test_conformance_vllm.VarlenWithPagedKV" \
    timeout "$left" bash scripts/gpu_python.sh >"$WORK/memcheck.out" 2>&1 &
fi
wait
{
  echo "== full grids, $SHARDS shares, done at $SECONDS s (deadline $DEADLINE)"
  for d in "$WORK"/*/; do
    name=$(basename "$d")
    [[ $name == module ]] && continue
    logs=("$d"/*.log)
    passed=$(cat "${logs[@]}" 2>/dev/null | grep -cE ' \.\.\. ok$')
    failed=$(cat "${logs[@]}" 2>/dev/null | grep -cE ' \.\.\. (FAIL|ERROR)$')
    result=$(cat "$d/python_tests.txt" 2>/dev/null | tr '\n' ' ')
    echo "$name: ${result:-cut short} ($passed tests ok, $failed failed so far)"
  done
  grep -h "ERROR SUMMARY" "$WORK"/memcheck/*.log 2>/dev/null | sort | uniq -c
} | tee "$FINAL/summary.txt"
tar czf "$FINAL/results.tgz" -C "$WORK" .
