#!/usr/bin/env bash
# The sanitizer gate (issue 12): a host-only clang build with AddressSanitizer and
# UndefinedBehaviorSanitizer (the first report ends the process), its unit and CLI tests, then each
# libFuzzer target for a fixed time over a corpus seeded from cases/*.json. Exit status non-zero on
# any failure, report or crash; crashing inputs are kept in build-sanitize/fuzz-artifacts/.
#   PAGEDATTN_FUZZ_SECONDS  seconds per fuzz target (default 30)
#   PAGEDATTN_FUZZ_LOG      also append each fuzzer's final statistics to this file
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure_deps.sh
pagedattn_ensure_deps "${pagedattn_sanitize_packages[@]}"

build=build-sanitize
seconds="${PAGEDATTN_FUZZ_SECONDS:-30}"
start=$(date +%s)
# No Python module here: an ASan-built extension needs the sanitizer runtime preloaded into the
# interpreter; the Python tests run in the normal build (scripts/test.sh).
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPAGEDATTN_CUDA=OFF -DPAGEDATTN_PYTHON=OFF -DPAGEDATTN_SANITIZE=address,undefined -DPAGEDATTN_FUZZ=ON \
  "-DPAGEDATTN_SIMD_LEFT_OUT=HWY_SSE4|HWY_AVX3"
cmake --build "$build" -j "$(nproc)"
built=$(date +%s)

# allocator_may_return_null: a refused huge allocation returns null as without ASan (tests check
# that path) instead of ending the process.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# The installed-package tests rebuild a consumer outside this build's flags: not sanitizer tests.
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" -E '^(example\.|consumer_)'
tested=$(date +%s)

# The fuzz targets load libstdc++ before the ASan runtime (the -fsanitize=fuzzer link order), which
# ASan refuses unless the runtime is preloaded.
asan_runtime=$(clang++-14 -print-file-name=libclang_rt.asan-x86_64.so)
corpus="$build/fuzz-corpus"
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
# The three targets side by side (each is one process; their wall time, not their sum, counts).
fuzz() {  # fuzz <target>: runs it, prints its summary; non-zero on a report or crash
  local target=$1 log="$build/$1.log"
  mkdir -p "$corpus/$target"
  if ! LD_PRELOAD="$asan_runtime" "$build/fuzz/$target" -max_total_time="$seconds" -max_len=8192 -timeout=20 \
      -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$artifacts/$target-" \
      "$corpus/$target" cases > "$log" 2>&1; then
    tail -n 60 "$log"
    echo "sanitize: $target failed; the input is in $artifacts/" >&2
    return 1
  fi
  # The last status line (coverage, corpus) and the final statistics (executions, speed, memory).
  summary=$( (grep -aE '^#[0-9]+[[:space:]].*cov:' "$log" | tail -n 1; grep -aE '^stat::' "$log") |
    sed "s/^/$target: /")
  echo "$summary"
  [[ -n "${PAGEDATTN_FUZZ_LOG:-}" ]] && echo "$summary" >> "$PAGEDATTN_FUZZ_LOG"
  return 0
}
echo "== fuzz_case_parser, fuzz_validate, fuzz_selector: ${seconds}s each, side by side"
pids=()
for target in fuzz_case_parser fuzz_validate fuzz_selector; do
  fuzz "$target" > "$build/$target.summary" 2>&1 &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
cat "$build"/fuzz_*.summary
((failed == 0)) || exit 1
done_at=$(date +%s)
echo "sanitize: build $((built - start))s, tests $((tested - built))s, fuzz $((done_at - tested))s: clean"
