#!/usr/bin/env bash
# CPU_ATTN against PyTorch on the CPU in one run: `pagedattn bench --backend cpu --suite all`
# (with its read and compute ceilings), then bench/cpu/peer_torch.py on the same decode and
# prefill shapes, then the table of ratios. Usage: bash scripts/bench_cpu.sh [build dir] [out dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-out/bench_cpu}
mkdir -p "$out"
"$build/tools/pagedattn" bench --backend cpu --suite all --json "$out/ours.json"
/usr/bin/python3 bench/cpu/peer_torch.py --json "$out/torch.json"
/usr/bin/python3 bench/cpu/ratio_table.py "$out/ours.json" "$out/torch.json" | tee "$out/table.txt"
