#!/usr/bin/env bash
# Runs ON THE GPU MACHINE, from the repo root, with .device/ carried (staged by scripts/gpu_build.sh):
#   1. tests: the GPU tests (gtest XML + log), then the Hopper, host unit and parity tests;
#   2. check: `pagedattn check --backend B --dump` on every staged case for each GPU backend B
#      (CHECK_BACKENDS, default flash_attn flashinfer), and check_case.py on each dump;
#   3. bench: `pagedattn bench --backend flash_attn --suite all` (JSON + table);
#   4. peer:  peer_sdpa.py (PyTorch SDPA flash / cuDNN / FlexAttention) in the same run.
# Everything lands in $OUT as at most 8 files: summary.txt, gpu_tests.log, gpu_tests.<shard>.xml,
# check.log, bench.log, bench.json, peer.log, peer.json.
#
#   STAGES="tests check" scripts/gpu_run.sh     run only some stages (default: all four)
#   GTEST_FILTER='FlashAttn*' scripts/gpu_run.sh   narrow the GPU tests
#   DEADLINE=540 (default)                      seconds for the whole script: every stage's timeout is
#                                               capped by what is left, so one call (600 s) is enough
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
STAGE=${STAGE:-$ROOT/.device}
OUT=${OUT:-$ROOT/out}
STAGES=${STAGES:-"tests check bench peer"}
mkdir -p "$OUT"
source "$ROOT/scripts/stage_unpack.sh" && unpack_stage "$STAGE"
export LD_LIBRARY_PATH="$STAGE/lib:${LD_LIBRARY_PATH:-}"
# NCCL for the NCCL communicator's tests: the machine's PyTorch ships one (too large to stage).
nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib"))' 2>/dev/null) &&
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_dir"
export PYTHONUNBUFFERED=1
CLI=$STAGE/bin/pagedattn
SUMMARY=$OUT/summary.txt
PY=${PYTHON:-python3}

DEADLINE=${DEADLINE:-540}
has_stage() { [[ " $STAGES " == *" $1 "* ]]; }
# limit CAP: a timeout of CAP seconds, or what is left of DEADLINE if less (at least 1).
limit() {
  local left=$((DEADLINE - SECONDS))
  ((left < 1)) && left=1
  echo $(($1 < left ? $1 : left))
}
note() { echo "$*" | tee -a "$SUMMARY"; }

: >"$SUMMARY"
note "== $(date -u +%FT%TZ) $(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 |
  tee -a "$SUMMARY"
"$CLI" info >>"$SUMMARY" 2>&1 || note "pagedattn info failed (rc $?)"

if has_stage tests; then
  # GPU_TEST_SHARDS processes side by side (the float64 oracle on the host bounds most tests, and
  # the GPU machine has many cores); their logs are joined into gpu_tests.log.
  start=$SECONDS shards=${GPU_TEST_SHARDS:-3} rc=0
  pids=()
  for ((i = 0; i < shards; ++i)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "$(limit 300)" \
      "$STAGE/bin/pagedattn_gpu_tests" --gtest_output="xml:$OUT/gpu_tests.$i.xml" \
      >"$OUT/gpu_tests.$i.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
  cat "$OUT"/gpu_tests.[0-9]*.log >"$OUT/gpu_tests.log" && rm -f "$OUT"/gpu_tests.[0-9]*.log
  counts=$(grep -hE '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$OUT/gpu_tests.log" |
    awk '{n[$2] += $4} END {for (k in n) printf "%s %d; ", k, n[k]}')
  note "gpu tests ($shards shards): rc $rc in $((SECONDS - start)) s; ${counts:-no summary (timed out?)}"
  grep -E '^\[  FAILED  \]' "$OUT/gpu_tests.log" | sort -u | head -40 >>"$SUMMARY"
  timeout "$(limit 60)" "$STAGE/bin/pagedattn_hopper_tests" >>"$OUT/gpu_tests.log" 2>&1
  note "Hopper primitive tests: rc $? ($(grep -cE '^\[       OK \] HopperPrimitives' "$OUT/gpu_tests.log") passed)"
  timeout "$(limit 60)" "$STAGE/bin/pagedattn_unit_tests" >>"$OUT/gpu_tests.log" 2>&1
  note "host unit tests: rc $?"
  timeout "$(limit 120)" "$STAGE/bin/pagedattn_parity_tests" >>"$OUT/gpu_tests.log" 2>&1
  note "parity tests (every backend, row by row): rc $? ($(grep -cE '^\[       OK \] Batches/Parity' "$OUT/gpu_tests.log") passed)"
  # DCP and NCCL ranks as processes, one GPU each (skipped, saying so, on a one-GPU machine).
  timeout "$(limit 120)" bash scripts/dcp_multi_gpu.sh "" "$STAGE/bin/pagedattn_multi_gpu_tests" 2>&1 |
    tee -a "$OUT/gpu_tests.log" | grep -E 'skipped|FAILED|passed' | tail -n 9 >>"$SUMMARY"
fi

if has_stage check; then
  # One case per job: the float64 oracle on the host dominates, and the GPU machine has many cores.
  check_one() {  # check_one <backend> <case file>
    local backend=$1 case_file=$2 name dump
    name=$(basename "$case_file" .json)
    dump=/tmp/pagedattn_dumps/$backend/$name
    rm -rf "$dump" && mkdir -p "$dump"
    if timeout "$CHECK_TIMEOUT" "$CLI" check "$case_file" --backend "$backend" --dump "$dump" &&
      timeout 150 "$PY" "$STAGE/tools/check_case.py" "$dump"; then
      echo "RESULT PASS $backend $name"
    else
      echo "RESULT FAIL $backend $name"
    fi
  }
  export -f check_one
  export CLI STAGE PY
  export CHECK_TIMEOUT=$(limit 200)
  for backend in ${CHECK_BACKENDS:-flash_attn flashinfer}; do
    for case_file in "$STAGE"/cases/*.json; do echo "$backend $case_file"; done
  done | xargs -P "${CHECK_JOBS:-8}" -L 1 bash -c 'check_one "$1" "$2" 2>&1' _ >"$OUT/check.log" 2>&1
  grep '^RESULT FAIL' "$OUT/check.log" | tee -a "$SUMMARY"
  for backend in ${CHECK_BACKENDS:-flash_attn flashinfer}; do
    pass=$(grep -c "^RESULT PASS $backend " "$OUT/check.log")
    fail=$(grep -c "^RESULT FAIL $backend " "$OUT/check.log")
    note "check --backend $backend + check_case.py: $pass passed, $fail failed"
  done
fi

if has_stage bench; then
  timeout "$(limit 180)" "$CLI" bench --backend flash_attn --suite all --json "$OUT/bench.json" \
    >"$OUT/bench.log" 2>&1
  note "bench: rc $?"
  tail -n 40 "$OUT/bench.log" >>"$SUMMARY"
fi

if has_stage peer; then
  timeout "$(limit 150)" "$PY" "$STAGE/tools/peer_sdpa.py" ${PEER_ARGS:-} --json "$OUT/peer.json" >"$OUT/peer.log" 2>&1
  note "peer_sdpa: rc $?"
  tail -n 30 "$OUT/peer.log" >>"$SUMMARY"
fi
note "== done in $SECONDS s"
