#!/usr/bin/env bash
# Builds the library and the command-line tool, then runs the demo: a scheduling step of a sample
# model through the backend the selector picks on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure_deps.sh
pagedattn_ensure_deps
pagedattn_build
cli=build/tools/pagedattn
if "$cli" --help | grep -qE '^ +demo +'; then
  "$cli" demo "$@"
else
  "$cli" info
  "$cli" select --head-size 128 --num-heads 32 --num-kv-heads 8 --dtype bf16 \
    --kv-cache-dtype fp8_e4m3 --block-size 16 --device cpu
fi
