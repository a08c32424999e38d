#!/usr/bin/env bash
# Times two builds of the CLI on the same GPU in one call, suite by suite and alternating, so a
# change's effect is measured beside its baseline (clock and thermal drift hit both alike).
#   OLD=.device-old NEW=.device bash scripts/bench_compare.sh [suite ...]
# Each stage holds bin/pagedattn and lib/; libcudart may live in either lib/. Writes
# $OUT/compare.json (every report) and prints a table of median times with new/old ratios.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:=$PWD/out}" "${OLD:?stage of the baseline build}" "${NEW:=.device}"
BACKEND=${BACKEND:-flash_attn}
ROUNDS=${ROUNDS:-2}
suites=("$@")
((${#suites[@]})) || suites=(prefill decode spec-verify mixed cascade fp8)
mkdir -p "$OUT" /tmp/compare
libs="$PWD/$OLD/lib:$PWD/$NEW/lib:${LD_LIBRARY_PATH:-}"
for ((round = 0; round < ROUNDS; ++round)); do
  for suite in "${suites[@]}"; do
    for build in OLD NEW; do
      stage=${!build}
      LD_LIBRARY_PATH="$PWD/$stage/lib:$libs" timeout "${BENCH_TIMEOUT:-120}" \
        "$stage/bin/pagedattn" bench --backend "$BACKEND" --suite "$suite" --repeats 20 --warmup 3 ${BENCH_ARGS:-} \
        --json "/tmp/compare/${build}_${suite}_${round}.json" >/dev/null 2>&1 ||
        echo "warning: $build $suite round $round failed" >&2
    done
  done
done
python3 - "$OUT/compare.json" /tmp/compare <<'PY'
import json, os, statistics, sys
out, folder = sys.argv[1], sys.argv[2]
reports, times = [], {}
for name in sorted(os.listdir(folder)):
    build, suite, _ = name[:-5].split("_", 2)
    report = json.load(open(os.path.join(folder, name)))
    reports.append({"build": build, "report": report})
    for r in report["results"]:
        times.setdefault((suite, r["case"]), {}).setdefault(build, []).append(r["median_ms"])
json.dump(reports, open(out, "w"), indent=1)
print(f"{'suite':12} {'case':34} {'old ms':>9} {'new ms':>9} {'new/old':>8}")
worst = 0.0
for (suite, case), t in sorted(times.items()):
    if "OLD" not in t or "NEW" not in t:
        print(f"{suite:12} {case:34} missing in {'OLD' if 'OLD' not in t else 'NEW'}")
        continue
    old, new = min(t["OLD"]), min(t["NEW"])  # best round of each: the least disturbed
    worst = max(worst, abs(new / old - 1))
    print(f"{suite:12} {case:34} {old:9.4f} {new:9.4f} {new / old:8.3f}")
print(f"largest difference: {100 * worst:.1f}%")
PY
