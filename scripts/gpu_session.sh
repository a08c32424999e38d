#!/usr/bin/env bash
# One complete GPU session in a single device call (the device time is scarce): GPU tests and
# `check` over every staged case run side by side (both are bound by the host oracle), then the
# benchmarks and the PyTorch peers on a quiet GPU. Results: at most 8 files under $OUT.
#   run(command="bash scripts/gpu_session.sh", carry=[".device"]) after scripts/gpu_build.sh here.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:=$PWD/out}"
export OUT
mkdir -p "$OUT/check"
STAGE=$PWD/.device
export LD_LIBRARY_PATH="$STAGE/lib:${LD_LIBRARY_PATH:-}"

OUT=$OUT/check STAGES=check DEADLINE=${CHECK_DEADLINE:-170} CHECK_JOBS=10 bash scripts/gpu_run.sh \
  >/dev/null 2>&1 &
STAGES=tests DEADLINE=${TEST_DEADLINE:-170} bash scripts/gpu_run.sh >/dev/null 2>&1
wait
rm -f "$OUT/gpu_tests.xml"
mv "$OUT/summary.txt" "$OUT/summary_tests.txt"

# Benchmarks on a quiet GPU: the CLI suites (with measured ceilings), the kernel bench (ratios).
# One CLI call per suite (a call for all of them outlasts the timeout: each case's batch is
# prepared on the host); their JSON reports are gathered into one list, bench.json.
{
  for suite in ${BENCH_SUITES:-prefill decode spec-verify mixed cascade fp8}; do
    timeout "${BENCH_TIMEOUT:-90}" "$STAGE/bin/pagedattn" bench --backend flash_attn \
      --suite "$suite" --repeats 20 --warmup 3 --json "/tmp/bench_$suite.json"
  done
  python3 -c 'import json, sys; json.dump([json.load(open(f)) for f in sys.argv[2:]],
    open(sys.argv[1], "w"), indent=1)' "$OUT/bench.json" /tmp/bench_*.json
  echo "== kernel bench (bench/kernel_bench.cu)"
  timeout 60 "$STAGE/bin/pagedattn_kernel_bench"
} >"$OUT/bench.log" 2>&1
echo "bench rc $?" >>"$OUT/summary_tests.txt"
STAGES=peer DEADLINE=${PEER_DEADLINE:-90} PEER_ARGS="--suite quick --no-flex" \
  bash scripts/gpu_run.sh >/dev/null 2>&1
cat "$OUT/summary.txt" >>"$OUT/summary_tests.txt"
rm -f "$OUT/summary.txt"
cat "$OUT/summary_tests.txt" "$OUT/check/summary.txt"
