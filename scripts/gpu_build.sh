#!/usr/bin/env bash
# Builds the CUDA configuration for the H200 (sm_90a) on this machine and stages what a GPU run
# needs into .device/ (git-ignored; the device tool carries it): the test binaries, the CLI and the
# shared library (stripped), libcudart, the case files and the two shared Python tools.
#
#   scripts/gpu_build.sh                 all head sizes
#   HEAD_SIZES="128" scripts/gpu_build.sh   fewer kernels, faster
#   JOBS=2 BUILD_DIR=build-device ...    (defaults)
# Then, on the device (from the repo root, carrying .device): scripts/gpu_run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-device}
HEAD_SIZES=${HEAD_SIZES:-all}
JOBS=${JOBS:-2}
SHARED=${SHARED_DIR:-$ROOT/../shared}
STAGE=$ROOT/.device
if [[ -z "${CUDACXX:-}" ]] && ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
  -DPAGEDATTN_CUDA=ON -DPAGEDATTN_CUDA_ARCHS=90a "-DPAGEDATTN_HEAD_SIZES=$HEAD_SIZES"
cmake --build "$BUILD_DIR" -j "$JOBS" --target pagedattn pagedattn_cli pagedattn_unit_tests \
  pagedattn_gpu_tests pagedattn_hopper_tests pagedattn_parity_tests pagedattn_kernel_bench \
  pagedattn_gpu_bench pagedattn_multi_gpu_tests

# Only our own subfolders are replaced; others' staging under .device/ stays.
rm -rf "$STAGE/bin" "$STAGE/lib" "$STAGE/cases" "$STAGE/tools" "$STAGE/include"
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/cases" "$STAGE/tools" "$STAGE/include/pagedattn"
cp "$BUILD_DIR/tests/pagedattn_gpu_tests" "$BUILD_DIR/tests/pagedattn_hopper_tests" \
  "$BUILD_DIR/tests/pagedattn_unit_tests" \
  "$BUILD_DIR/tests/pagedattn_parity_tests" "$BUILD_DIR/tests/pagedattn_multi_gpu_tests" \
  "$BUILD_DIR/tools/pagedattn" "$BUILD_DIR/bench/pagedattn_kernel_bench" \
  "$BUILD_DIR/bench/pagedattn_gpu_bench" "$STAGE/bin/"
cp -L "$BUILD_DIR/src/libpagedattn.so.0" "$STAGE/lib/libpagedattn.so.0"
# The configured header, for scripts/gpu_python.sh's module build there.
cp "$BUILD_DIR/include/pagedattn/config.h" "$STAGE/include/pagedattn/"
cudart=$(ldd "$BUILD_DIR/tests/pagedattn_gpu_tests" | awk '/libcudart/ {print $3}')
[[ -n "$cudart" ]] && cp -L "$cudart" "$STAGE/lib/"
# The CPU backend's libraries (Highway, oneDNN and its OpenMP), which the GPU machine lacks.
for dep in libhwy libdnnl libgomp libOpenCL; do
  path=$(ldd "$BUILD_DIR/src/libpagedattn.so.0" | awk -v d="$dep" '$1 ~ "^" d "\\." {print $3}')
  [[ -n "$path" ]] && cp -L "$path" "$STAGE/lib/"
done
strip --strip-unneeded "$STAGE/bin/"* "$STAGE/lib/libpagedattn.so.0"
# Compressed: with every head size the library is over 50 MiB, oneDNN 40 (scripts/stage_unpack.sh
# unpacks them).
xz -f -T "$JOBS" -6 "$STAGE/lib/libpagedattn.so.0"
[[ -f "$STAGE/lib/libdnnl.so.2" ]] && xz -f -T "$JOBS" -6 "$STAGE/lib/libdnnl.so.2"
# The team's shared case files and peer tools when this checkout sits beside them, else our own cases.
if [[ -d "$SHARED" ]]; then
  cp "$SHARED"/cases/*.json "$STAGE/cases/"
  cp "$SHARED/tools/check_case.py" "$SHARED/tools/peer_sdpa.py" "$STAGE/tools/"
else
  cp "$ROOT"/cases/*.json "$STAGE/cases/"
fi

total=$(du -sm "$STAGE" | cut -f1)
echo "staged into $STAGE (${total} MiB; the device carries at most 64 MiB with the tree):"
ls -la "$STAGE"/bin "$STAGE"/lib
if ((total >= 60)); then
  echo "error: .device is ${total} MiB; build fewer head sizes (HEAD_SIZES=...)" >&2
  exit 1
fi
