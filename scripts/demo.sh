#!/usr/bin/env bash
# The main job: installs what is missing, builds the command-line tool and runs `pagedattn serve`
# (an engine-shaped workload through the backend the selector picks, checked by the float64 oracle;
# docs/serve.md). Arguments go to `serve`, e.g. `bash scripts/demo.sh --backend all`. The plot and
# the JSON land in serve-out/ (ignored by git).
# Builds only the tool, in build-demo/; the CUDA kernels only when a GPU is visible (nvidia-smi),
# since nothing else could run them, unless PAGEDATTN_CUDA=ON|OFF|AUTO says otherwise (as for the
# Python package). PAGEDATTN_CMAKE_ARGS, PAGEDATTN_CUDA_ARCHS and PAGEDATTN_HEAD_SIZES work as for
# scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure_deps.sh
pagedattn_ensure_deps
args=(-DCMAKE_BUILD_TYPE=Release -DPAGEDATTN_BUILD_TESTS=OFF)
cuda=${PAGEDATTN_CUDA:-}
if [[ -z "$cuda" ]]; then
  cuda=OFF
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then cuda=AUTO; fi
fi
args+=("-DPAGEDATTN_CUDA=$cuda")
[[ -n "${PAGEDATTN_CUDA_ARCHS:-}" ]] && args+=("-DPAGEDATTN_CUDA_ARCHS=${PAGEDATTN_CUDA_ARCHS}")
[[ -n "${PAGEDATTN_HEAD_SIZES:-}" ]] && args+=("-DPAGEDATTN_HEAD_SIZES=${PAGEDATTN_HEAD_SIZES}")
# shellcheck disable=SC2206
args+=(${PAGEDATTN_CMAKE_ARGS:-})
cmake -S . -B build-demo "${args[@]}"
cmake --build build-demo -j "$(nproc)" --target pagedattn_cli
build-demo/tools/pagedattn serve "$@"
