"""FP8 prefill through the vLLM drop-in beside the kernel bench (issue 34's acceptance: TFLOP/s within 5%).

The shapes of V3Fp8Bench.Prefill8192 (1 x 8192 tokens; 32 / 8 heads at D 128, 16 / 4 at D 256; causal
and not; pages of 128, shuffled): Q, K and V in float8_e4m3fn with descales of 1, K and V as two
tensors, as vLLM's FA3 path passes them, through pagedattn.vllm_compat.flash_attn_varlen_func with the
step's scheduler_metadata made once without a block table (as vLLM's builder calls it). Time per call
of 20 calls enqueued back to back between two CUDA events, after 3 warm-ups, best of two; the kernel
generation the drop-in's layer reported beside it.
With --cli C it also runs `C bench --suite fp8-prefill --fp8-tensor-cores --backend flash_attn` (the same
shapes through the C++ backend, with a bf16 query: issue 34's reference) before and after the drop-in,
its best of the two; with --kernel-bench B `B --gtest_filter=V3Fp8Bench.Prefill8192` (the kernel alone,
best of its v3 FP8 rounds); and prints a table of the ratios.
With --profile, each shape's GPU kernels over 3 calls (torch.profiler): where a call's time goes.

Run on a GPU machine with the Python module built (scripts/gpu_python.sh builds it):
  python3 bench/gpu/fp8_dropin_bench.py --cli .device/bin/pagedattn --kernel-bench .device/bin/pagedattn_gpu_bench
"""
import argparse
import json
import re
import subprocess
import tempfile

import torch

from pagedattn import _vllm_layers, vllm_compat

SHAPES = (("1x8192 d128", 32, 8, 128), ("1x8192 d256", 16, 4, 256))
LEN, BLOCK = 8192, 128


def flops(heads, d, causal):
    keys = LEN - (LEN - 1) / 2.0 if causal else LEN
    return 4.0 * LEN * keys * heads * d


def mean_ms(call, warmups=3, timed=20):
    """Milliseconds per call of `timed` calls enqueued back to back between two events (the host runs
    ahead of the GPU, as in a serving engine), after `warmups`."""
    for _ in range(warmups):
        call()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(timed):
        call()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / timed


def profile_table(call, label, calls=3):
    """Each GPU kernel's time per call of `calls` calls (torch.profiler), longest first."""
    call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    rows = [(e.device_time_total / calls, e.count / calls, e.key) for e in prof.key_averages() if e.device_time_total]
    print("\n%s: GPU time per call, by kernel (%.1f us in all)" % (label, sum(r[0] for r in rows)))
    for us, count, name in sorted(rows, reverse=True):
        print("  %9.1f us  x%-4g %s" % (us, count, name[:110]))


def dropin_tflops(heads, kv_heads, d, causal, profile=False):
    gen = torch.Generator(device="cuda").manual_seed(1)
    fp8 = torch.float8_e4m3fn
    q = torch.randn(LEN, heads, d, device="cuda", generator=gen).to(fp8)
    blocks = LEN // BLOCK
    k = torch.randn(blocks, BLOCK, kv_heads, d, device="cuda", generator=gen).to(fp8)
    v = torch.randn(blocks, BLOCK, kv_heads, d, device="cuda", generator=gen).to(fp8)
    table = torch.randperm(blocks, device="cuda", generator=gen).to(torch.int32).view(1, blocks)
    cu_q = torch.tensor([0, LEN], dtype=torch.int32, device="cuda")
    seqused = torch.tensor([LEN], dtype=torch.int32, device="cuda")
    ones = torch.ones(1, kv_heads, dtype=torch.float32, device="cuda")
    out = torch.empty(LEN, heads, d, dtype=torch.bfloat16, device="cuda")
    schedule = vllm_compat.get_scheduler_metadata(1, LEN, LEN, heads, kv_heads, d, seqused, qkv_dtype=fp8,
                                                  cu_seqlens_q=cu_q, page_size=BLOCK, causal=causal)

    def call():
        vllm_compat.flash_attn_varlen_func(q, k, v, LEN, cu_q, LEN, seqused_k=seqused, causal=causal,
                                           block_table=table, out=out, scheduler_metadata=schedule,
                                           q_descale=ones, k_descale=ones, v_descale=ones, fa_version=3)
    best = max(flops(heads, d, causal) / mean_ms(call) / 1e9 for _ in range(2))
    if profile:
        profile_table(call, "drop-in %d/%d heads d%d %s" % (heads, kv_heads, d, "causal" if causal else "noncausal"))
    generations = sorted({entry[0].kernel_generation() for entry in _vllm_layers._impls.values()})
    _vllm_layers._impls.clear()
    return best, "/".join(generations)


def kernel_tflops(kernel_bench):
    """{(shape, mask): best v3 FP8 TFLOP/s} from V3Fp8Bench.Prefill8192's BENCH lines."""
    text = subprocess.run([kernel_bench, "--gtest_filter=V3Fp8Bench.Prefill8192"], capture_output=True, text=True,
                          check=False).stdout
    best = {}
    for m in re.finditer(r"^BENCH (\S+ \S+)\s+v3 FP8\s+(causal|noncausal)\s+[\d.]+ ms\s+([\d.]+) TFLOP/s", text, re.M):
        key = (m.group(1), m.group(2))
        best[key] = max(best.get(key, 0.0), float(m.group(3)))
    return best


def cli_tflops(cli):
    """{(shape, mask): TFLOP/s} of `pagedattn bench --suite fp8-prefill --fp8-tensor-cores` through FLASH_ATTN
    (median of 20 forwards after 3 warm-ups), counted as flops() counts them."""
    heads = {d: (h, kv) for _, h, kv, d in SHAPES}
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([cli, "bench", "--suite", "fp8-prefill", "--fp8-tensor-cores", "--backend", "flash_attn",
                        "--repeats", "20", "--warmup", "3", "--json", out.name], capture_output=True, check=False)
        results = json.load(open(out.name)).get("results", [])
    rates = {}
    for r in results:
        if r.get("tokens") != LEN or r.get("D") not in heads or not r.get("median_ms"):
            continue
        mask = "causal" if r["causal"] else "noncausal"
        rates[("1x%d d%d" % (LEN, r["D"]), mask)] = (
            flops(heads[r["D"]][0], r["D"], r["causal"]) / r["median_ms"] / 1e9, r.get("generation", "?"))
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel-bench", help="pagedattn_gpu_bench binary, timed in the same run")
    parser.add_argument("--cli", help="the pagedattn CLI, its fp8-prefill suite timed in the same run")
    parser.add_argument("--profile", action="store_true", help="print each shape's kernels per call (torch.profiler)")
    args = parser.parse_args()
    # The CLI runs before and after the drop-in (its best of the two), so that clock drift over the run
    # does not favour either side.
    cli_before = cli_tflops(args.cli) if args.cli else {}
    dropin = {}
    for name, heads, kv_heads, d in SHAPES:
        for causal in (False, True):
            dropin[(name, "causal" if causal else "noncausal")] = dropin_tflops(heads, kv_heads, d, causal, args.profile)
    kernel = kernel_tflops(args.kernel_bench) if args.kernel_bench else {}
    cli_after = cli_tflops(args.cli) if args.cli else {}
    cli = {key: max(cli_before.get(key, (0.0, "")), cli_after.get(key, (0.0, ""))) for key in cli_before.keys() | cli_after.keys()}

    def cell(value, ref):
        return ("%.1f" % ref, "%.3f" % (value / ref)) if ref else ("-", "-")
    print("| shape | mask | drop-in kernel | drop-in TFLOP/s | pagedattn bench (generation) TFLOP/s | drop-in / bench "
          "| v3 FP8 kernel bench TFLOP/s | drop-in / kernel |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for key, (value, generation) in dropin.items():
        bench, bench_generation = cli.get(key, (None, ""))
        bench_cells = cell(value, bench)
        kernel_cells = cell(value, kernel.get(key))
        print("| %s | %s | %s | %.1f | %s%s | %s | %s | %s |" % (
            key[0], key[1], generation, value, bench_cells[0], " (%s)" % bench_generation if bench else "",
            bench_cells[1], kernel_cells[0], kernel_cells[1]))


if __name__ == "__main__":
    main()
