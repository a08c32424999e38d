#!/usr/bin/env bash
# Runs ON THE GPU MACHINE from a staged folder: the standard suite through our backends and the
# peers' kernels in one call, then the joined table.
#   1. `pagedattn bench --suite standard` for FLASH_ATTN v2, FLASH_ATTN auto (v3 where it serves)
#      and FLASHINFER, case by case on one batch (prefill at block 128, decode at block 16);
#   2. peer_sdpa.py --suite standard --no-flex (PyTorch SDPA flash and cuDNN, dense K/V);
#   3. `--suite overhead` on FLASHINFER and FLASH_ATTN (mixed batch vs. its parts, forward launch
#      overhead, build() host time);
#   4. the standard prefill shapes again at block 16 (issue 10: within 10% of block 128);
#   5. both GPU backends' decode 64 x 4096 with a bf16 and an FP8 e4m3 cache at blocks 16 and 1024,
#      NHD then HND (page 1024 at least as fast as 16, FP8 at most 0.6 x the bf16 time);
#   6. tools/bench_report.py on all of it (markdown table in the log; PLOT=file.png draws the
#      roofline where matplotlib is installed).
# Writes two files: $OUT/bench_standard.log (everything printed) and $OUT/bench_standard.json
# ({"pagedattn": [bench documents], "peer": [peer rows], "report": markdown}); bench_report.py
# reads that file anywhere to redo the table or draw the plot.
#
#   STAGE=.device OUT=out scripts/bench_standard.sh
#   STAGE: folder with bin/pagedattn, lib/ and tools/peer_sdpa.py (default: the repo's .device;
#          bench_report.py is taken from STAGE/tools or this checkout's tools/)
#   DEADLINE=180 (seconds for everything; each step is capped by what is left), REPEATS=20,
#   WARMUP=3, STEPS="standard peer overhead block16 pages" (which, in the order given),
#   STANDARD_FILTER / BLOCK16_FILTER (regular expressions on case names), PYTHON=python3
# On the H200 (first call, 2026-12-01) the steps took about: standard 55 s (making the random
# batches on the host is most of it: a decode shape's K/V is 1 to 4 GiB), peer 19 s, overhead
# 12 s, block16 20 s, pages 12 s.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
STAGE=$(cd "${STAGE:-$HERE/../.device}" && pwd)
OUT=${OUT:-$PWD/out}
DEADLINE=${DEADLINE:-180}
REPEATS=${REPEATS:-20}
WARMUP=${WARMUP:-3}
STEPS=${STEPS:-"standard peer overhead block16 pages"}
PY=${PYTHON:-python3}
source "$HERE/stage_unpack.sh" && unpack_stage "$STAGE"
export LD_LIBRARY_PATH="$STAGE/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
CLI=$STAGE/bin/pagedattn
REPORT=$STAGE/tools/bench_report.py
[[ -f $REPORT ]] || REPORT=$HERE/../tools/bench_report.py
WORK=$(mktemp -d)
LOG=$OUT/bench_standard.log
mkdir -p "$OUT"
: >"$LOG"

# limit CAP: CAP seconds, or what is left of DEADLINE if less (at least 1).
limit() {
  local left=$((DEADLINE - SECONDS))
  ((left < 1)) && left=1
  echo $(($1 < left ? $1 : left))
}
# step NAME CAP COMMAND...: runs it under its time limit, everything into the log.
step() {
  local name=$1 cap=$2 start=$SECONDS rc
  shift 2
  echo "== $name (limit $(limit "$cap") s): $*" >>"$LOG"
  timeout "$(limit "$cap")" "$@" >>"$LOG" 2>&1
  rc=$?
  echo "== $name: rc $rc in $((SECONDS - start)) s" | tee -a "$LOG"
}
ours=(flash_attn:v2 flash_attn:auto flashinfer:auto)
variants=$(IFS=,; echo "${ours[*]}")

echo "== $(date -u +%FT%TZ) $(hostname); stage $STAGE" >>"$LOG"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >>"$LOG" 2>&1
run_standard() {
  step standard 80 "$CLI" bench --suite standard --backend "$variants" \
    --filter "${STANDARD_FILTER:-.}" --repeats "$REPEATS" --warmup "$WARMUP" --json "$WORK/standard.json"
}
run_peer() {
  step peer 40 "$PY" "$STAGE/tools/peer_sdpa.py" --suite standard --no-flex --json "$WORK/peer.json"
}
run_overhead() {
  step overhead 25 "$CLI" bench --suite overhead --backend flashinfer,flash_attn \
    --repeats "$REPEATS" --warmup "$WARMUP" --json "$WORK/overhead.json"
}
run_block16() {
  step block16 35 "$CLI" bench --suite standard --filter "${BLOCK16_FILTER:-^prefill}" \
    --block-size 16 --backend "$variants" --repeats "$REPEATS" --warmup "$WARMUP" \
    --json "$WORK/block16.json"
}
run_pages() {
  step pages 45 "$CLI" bench --suite all --filter '^(fp8_e4m3_)?decode_' --block-size 16,1024 \
    --backend flashinfer,flash_attn --repeats "$REPEATS" --warmup "$WARMUP" --json "$WORK/pages.json"
  step pages_hnd 45 "$CLI" bench --suite all --filter '^(fp8_e4m3_)?decode_' --block-size 16,1024 \
    --kv-layout HND --backend flashinfer,flash_attn --repeats "$REPEATS" --warmup "$WARMUP" \
    --json "$WORK/pages_hnd.json"
}
for name in $STEPS; do
  case $name in
    standard | peer | overhead | block16 | pages) "run_$name" ;;
    *) echo "== unknown step '$name' (steps: standard peer overhead block16 pages)" | tee -a "$LOG" ;;
  esac
done

# The bundle, then the table from it (into the log and the bundle).
"$PY" - "$WORK" "$OUT/bench_standard.json" <<'PY' >>"$LOG" 2>&1
import json, os, sys
work, out = sys.argv[1], sys.argv[2]
bundle = {"pagedattn": [], "peer": []}
for name in ("standard", "overhead", "block16", "pages", "pages_hnd"):
    path = os.path.join(work, name + ".json")
    if os.path.exists(path):
        try:
            bundle["pagedattn"].append(json.load(open(path)))
        except ValueError as ex:
            print(f"bundle: {name}.json unreadable: {ex}")
peer = os.path.join(work, "peer.json")
if os.path.exists(peer):
    bundle["peer"] = [json.loads(line) for line in open(peer) if line.strip()]
json.dump(bundle, open(out, "w"), indent=1)
PY
if [[ -f $REPORT ]]; then
  "$PY" "$REPORT" "$OUT/bench_standard.json" --markdown "$WORK/report.md" \
    ${PLOT:+--plot "$PLOT"} >>"$LOG" 2>&1
  echo "== report: rc $?" | tee -a "$LOG"
  cat "$WORK/report.md" >>"$LOG" 2>/dev/null
  "$PY" - "$OUT/bench_standard.json" "$WORK/report.md" <<'PY' >>"$LOG" 2>&1
import json, sys
bundle = json.load(open(sys.argv[1]))
bundle["report"] = open(sys.argv[2]).read()
json.dump(bundle, open(sys.argv[1], "w"), indent=1)
PY
fi
rm -rf "$WORK"
echo "== done in $SECONDS s" | tee -a "$LOG"
