#!/usr/bin/env bash
# Runs ON THE GPU MACHINE, from the repo root, with .device/ carried (scripts/gpu_build.sh): builds the
# Python module for that machine's Python (3.12 there, 3.11 here) against the staged libpagedattn and
# runs the Python suites with a CUDA device visible (the conformance grids' GPU variants included).
#   run(command="bash scripts/gpu_python.sh", carry=[".device"])
#   PAGEDATTN_FULL_GRID=1 bash scripts/gpu_python.sh     every case of the peers' grids
#   PAGEDATTN_FULL_GRID=1 PAGEDATTN_GRID_SHARD=0/4 ...     a quarter of them (0/4 to 3/4: four calls)
#   TESTS="test_conformance_vllm" bash scripts/gpu_python.sh   some suites only
#   WRAP="compute-sanitizer --tool memcheck --error-exitcode 99" TESTS=... ...   each suite under a tool
#   FP8_BENCH=1 TESTS=none bash scripts/gpu_python.sh   FP8 prefill through the drop-in beside the kernel
#                                                       bench (bench/gpu/fp8_dropin_bench.py), no suites
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STAGE=${STAGE:-$ROOT/.device}
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
source scripts/stage_unpack.sh && unpack_stage "$STAGE"
# MODULE_DIR: where the package is built, or was by an earlier run (reused: scripts/gpu_grids.sh
# builds it once for its parallel runs).
pkg=${MODULE_DIR:-$(mktemp -d)}/pagedattn
ext=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
if [[ ! -f $pkg/_C$ext ]]; then
  mkdir -p "$pkg" "$pkg/../generated"
  cp python/pagedattn/*.py "$pkg/"
  cmake -DSOURCE_DIR="$ROOT" -DOUTPUT="$pkg/../generated/pagedattn_build_info.h" -DBUILD_TYPE=Release \
    -DPYTHON_VERSION="$(python3 -c 'import platform; print(platform.python_version())')" \
    -P cmake/build_info.cmake >/dev/null
  objs=()
  for src in python/src/*.cc; do
    obj=$pkg/../$(basename "$src" .cc).o
    objs+=("$obj")
    g++ -std=c++20 -O2 -fPIC -fvisibility=hidden -Iinclude -I"$STAGE/include" -Ipython/src \
      -I"$pkg/../generated" $(python3 -m pybind11 --includes) -c "$src" -o "$obj" &
  done
  wait
  g++ -shared -o "$pkg/_C$ext" "${objs[@]}" -L"$STAGE/lib" -l:libpagedattn.so.0 -Wl,-rpath,"$STAGE/lib" ||
    { echo "python module build failed" | tee "$OUT/python_tests.txt"; exit 1; }
fi
export PYTHONPATH=$(dirname "$pkg") LD_LIBRARY_PATH="$STAGE/lib:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
# The staged case files and CLI, as CTest passes them (the copy has no .git: the commit reads unknown).
export PAGEDATTN_CASE_DIRS="$STAGE/cases" PAGEDATTN_CLI="$STAGE/bin/pagedattn"
python3 -c "import pagedattn, torch; print(pagedattn.build_info()); print(torch.cuda.get_device_name())"
cd tests/python
# test_build_info checks the commit, which the copy here (no .git) cannot know: run it from a checkout.
suites=${TESTS:-$(ls test_*.py | sed 's/\.py$//' | grep -v '^test_build_info$')}
[[ $suites == none ]] && suites=""
: >"$OUT/python_tests.txt"; : >"$OUT/python_tests.log"
for t in $suites; do
  log=$OUT/$t.log  # streamed, so that a run cut short still shows the cases it passed
  timeout "${SUITE_TIMEOUT:-300}" ${WRAP:-} python3 -m unittest -v "$t" >"$log" 2>&1
  echo "python $t: rc $? $(grep -E '^(OK|FAILED)' "$log" | tail -1)" | tee -a "$OUT/python_tests.txt"
  { echo "=== $t"; cat "$log"; } >>"$OUT/python_tests.log"
  rm -f "$log"
done
if [[ -n ${FP8_BENCH:-} ]]; then
  python3 "$ROOT/bench/gpu/fp8_dropin_bench.py" --cli "$STAGE/bin/pagedattn" ${FP8_PROFILE:+--profile} \
    --kernel-bench "$STAGE/bin/pagedattn_gpu_bench" 2>&1 |
    tee "$OUT/fp8_dropin_bench.md"
fi
