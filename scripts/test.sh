#!/usr/bin/env bash
# Builds everything (the CUDA sources too when nvcc is installed) and runs every test through CTest.
# GPU tests skip visibly on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure_deps.sh
pagedattn_ensure_deps
deps_done=$SECONDS
pagedattn_build
built=$SECONDS
ctest --test-dir build --output-on-failure -j "$(nproc)"
echo "test.sh: dependencies ${deps_done}s, build $((built - deps_done))s, tests $((SECONDS - built))s"
