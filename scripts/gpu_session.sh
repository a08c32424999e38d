#!/usr/bin/env bash
# One complete GPU session in a single device call (the device time is scarce): GPU tests and
# `check` over every staged case run side by side (both are bound by the host oracle), then
# compute-sanitizer over a subset of both, then the benchmarks and the PyTorch peers on a quiet GPU.
# Results under $OUT (summary_tests.txt holds every summary, check's included; PACK=1 puts the
# rest into results.tgz, since a device call returns at most 8 files).
#   run(command="bash scripts/gpu_session.sh", carry=[".device"]) after scripts/gpu_build.sh here.
#   PARTS="sanitize" bash scripts/gpu_session.sh    only some parts (default: tests sanitize serve bench)
#   STAGE=/abs/path                                 where the staged bin/ lib/ cases/ are (.device)
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:=$PWD/out}"
export OUT
mkdir -p "$OUT/check"
STAGE=${STAGE:-$PWD/.device}
PARTS=${PARTS:-"tests sanitize serve bench"}
has_part() { [[ " $PARTS " == *" $1 "* ]]; }
source scripts/stage_unpack.sh && unpack_stage "$STAGE"
export LD_LIBRARY_PATH="$STAGE/lib:${LD_LIBRARY_PATH:-}"
: >"$OUT/summary_tests.txt"

# compute-sanitizer (issue 12): memcheck, racecheck, initcheck and synccheck, the four tools side by
# side (one GPU, many host cores), each over a subset of the GPU tests that fits (racecheck, the
# slowest, over fewer) and over `check` through both GPU backends on a few shared cases. One line per
# run in summary_tests.txt, the first errors of each in compute_sanitizer.txt. SANITIZE_DEADLINE
# bounds the whole part (seconds).
sanitize() {
  local report=$OUT/compute_sanitizer.txt deadline=$((SECONDS + ${SANITIZE_DEADLINE:-200}))
  local cs
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  local tests_filter=${SANITIZE_TESTS:-'*CacheWrite*:*MergeStates*:DevicePrimitives*:PagedAttentionKernel.*:*FlashAttnFeatures.*:FlashAttnSplitKV.*:FlashAttnCascade.*:FlashAttnGraph.*:*FlashInferFeatures.*:FlashInferCascade.*:FlashInferGraph.*:FlashInferDeterminism.*:DecodeKernel.*:PagedAttentionV3*-*LongContext*'}
  local race_filter=${SANITIZE_RACE_TESTS:-'*MergeStates*:PagedAttentionKernel.SplitKv:PagedAttentionKernel.Fp8Caches:FlashAttnCascade.SharedPrefixMatchesPlainAttention:DecodeKernel.*:PagedAttentionV3*'}
  local cases=${SANITIZE_CASES:-"small_decode mixed_small_softcap mixed_medium_fp8 cascade_shared_prefix"}
  local backends=${SANITIZE_BACKENDS:-"flash_attn flashinfer"}
  one() {  # one <tool> <label> <command...>: appends a line to $lines and the details to $details
    local tool=$1 label=$2 left=$((deadline - SECONDS)) log rc found
    shift 2
    log=$(mktemp)
    if ((left < 5)); then
      echo "compute-sanitizer $tool $label: skipped (SANITIZE_DEADLINE)" >>"$lines"
      return
    fi
    local extra=()
    [[ $tool == memcheck ]] && extra=(--leak-check full)
    timeout "$left" "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 99 --print-limit 20 "$@" \
      >"$log" 2>&1
    rc=$?
    # "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: H hazards displayed (N errors, ...)".
    found=$(grep -oE '(ERROR SUMMARY: [0-9]+|\([0-9]+ errors)' "$log" | tail -1 | grep -oE '[0-9]+')
    local line="compute-sanitizer $tool $label: rc $rc, ${found:-?} errors"
    ((rc == 124)) && line+=" (timed out)"
    # A timed-out run is reported as such; any other non-zero exit or error count is a failure.
    if ((rc != 124)) && { [[ "${found:-x}" != 0 ]] || ((rc != 0)); }; then line+=" FAILED"; fi
    echo "$line" >>"$lines"
    { echo "== $line"; grep -E '^========= ' "$log" | head -n 60
      grep -E '^\[  (PASSED|FAILED) | (PASS|FAIL)$' "$log" | tail -n 5; } >>"$details"
    rm -f "$log"
  }
  # The GPU tests under each tool run in SANITIZE_SHARDS gtest shards side by side (a tool slows a
  # kernel 10-100x; one process over the list ran out of time), each shard its own line.
  local tool shards=${SANITIZE_SHARDS:-3} i
  rm -f /tmp/cs_*.lines /tmp/cs_*.details
  for tool in memcheck initcheck synccheck racecheck; do
    filter=$tests_filter
    [[ $tool == racecheck ]] && filter=$race_filter
    for ((i = 0; i < shards; ++i)); do
      (
        lines=/tmp/cs_${tool}_$i.lines details=/tmp/cs_${tool}_$i.details
        GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
          one "$tool" "gpu tests shard $((i + 1))/$shards" "$STAGE/bin/pagedattn_gpu_tests" \
          --gtest_filter="$filter"
      ) &
    done
    (
      lines=/tmp/cs_${tool}_check.lines details=/tmp/cs_${tool}_check.details
      for backend in $backends; do
        for name in $cases; do
          [[ -f "$STAGE/cases/$name.json" ]] || continue
          one "$tool" "check --backend $backend $name" "$STAGE/bin/pagedattn" check \
            --backend "$backend" "$STAGE/cases/$name.json"
        done
      done
    ) &
  done
  wait
  : >"$report"
  for tool in memcheck initcheck synccheck racecheck; do
    cat /tmp/cs_"$tool"_*.lines >>"$OUT/summary_tests.txt"
    cat /tmp/cs_"$tool"_*.details >>"$report"
  done
  local failed
  failed=$(cat /tmp/cs_*.lines | grep -c 'FAILED')
  echo "compute-sanitizer: $failed runs with errors" | tee -a "$report" >>"$OUT/summary_tests.txt"
}

# `pagedattn serve` side by side: every available backend (CPU_ATTN too) on the small preset, then
# the two GPU backends on llama3-8b's attention shape (docs/performance.md's workload).
serve() {
  timeout "${SERVE_TIMEOUT:-150}" "$STAGE/bin/pagedattn" serve --backend all --preset tiny \
    --json "$OUT/serve_tiny.json" --plot "$OUT/serve_tiny.svg" >"$OUT/serve.txt" 2>&1
  echo "serve --backend all --preset tiny: rc $?" >>"$OUT/summary_tests.txt"
  if [[ -z "${SERVE_TINY_ONLY:-}" ]]; then
    timeout "${SERVE_TIMEOUT:-150}" "$STAGE/bin/pagedattn" serve --backend flash_attn,flashinfer \
      --preset llama3-8b --num-blocks 16384 --max-num-seqs 128 --max-num-batched-tokens 4096 \
      --requests 96 --rate 16 --prompt-lens uniform:128:2048 --output-lens uniform:32:128 \
      --shared-prefix-share 0.5 --check-every 48 --json "$OUT/serve_llama.json" \
      --plot "$OUT/serve_llama.svg" >>"$OUT/serve.txt" 2>&1
    echo "serve --backend flash_attn,flashinfer --preset llama3-8b: rc $?" >>"$OUT/summary_tests.txt"
  fi
  grep -E '^\|' "$OUT/serve.txt" >>"$OUT/summary_tests.txt"
}

if has_part tests; then
  OUT=$OUT/check STAGES=check DEADLINE=${CHECK_DEADLINE:-170} CHECK_JOBS=10 bash scripts/gpu_run.sh \
    >/dev/null 2>&1 &
  STAGES=tests DEADLINE=${TEST_DEADLINE:-300} bash scripts/gpu_run.sh >/dev/null 2>&1
  wait
  rm -f "$OUT"/gpu_tests*.xml
  cat "$OUT/summary.txt" >>"$OUT/summary_tests.txt"
  rm -f "$OUT/summary.txt"
fi
has_part sanitize && sanitize
has_part serve && serve

if has_part bench; then
  # On a quiet GPU: the standard suite through both backends beside the peers, the overhead suite,
  # block 16 and the page/FP8 figures (scripts/bench_standard.sh), with the joined table and the
  # roofline plot.
  # (PLOT first: assignments before a command see the ones left of them.)
  PLOT=$OUT/bench/roofline.png STAGE=$STAGE OUT=$OUT/bench DEADLINE=${BENCH_DEADLINE:-170} \
    bash scripts/bench_standard.sh >/dev/null 2>&1
  echo "bench_standard: rc $?" >>"$OUT/summary_tests.txt"
fi
# check's summary joins the others (the sanitizer report takes its file's place among the 8).
if [[ -f "$OUT/check/summary.txt" ]]; then
  cat "$OUT/check/summary.txt" >>"$OUT/summary_tests.txt"
  rm -f "$OUT/check/summary.txt"
fi
# Everything but the summary in one archive: a device call returns at most 8 files.
if [[ -n "${PACK:-}" ]]; then
  (cd "$OUT" && tar czf /tmp/results.tgz --exclude=summary_tests.txt . &&
    find . -mindepth 1 -not -name summary_tests.txt -delete && mv /tmp/results.tgz .)
fi
cat "$OUT/summary_tests.txt"
