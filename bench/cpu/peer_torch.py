#!/usr/bin/python3
"""PyTorch on the CPU as the peer of `pagedattn bench --backend cpu`: the same decode and prefill
shapes, dense (no paging), grouped-query attention as matmul, softmax, matmul in the cases' dtype.
PyTorch 1.13 (Debian's python3-torch) has no scaled_dot_product_attention; where a newer one has
it, --sdpa uses it. Prints one line per case and writes JSON with --json."""
import argparse
import json
import math
import os
import statistics
import time

import torch

# (case name as `pagedattn bench` names it, requests, query tokens, context, causal)
CASES = [
    ("decode_32x2048", 32, 1, 2048, True),
    ("decode_8x8192", 8, 1, 8192, True),
    ("prefill_1x1024_noncausal", 1, 1024, 1024, False),
    ("prefill_1x1024_causal", 1, 1024, 1024, True),
    ("fp8_e4m3_decode_32x2048", 32, 1, 2048, True),  # PyTorch reads bf16: it has no FP8 matmul
]
HEADS, KV_HEADS, HEAD_SIZE = 32, 8, 128


def attention(q, k, v, causal, sdpa):
    """q [B, Hkv, G*T, D] (G query heads per KV head, T tokens), k and v [B, Hkv, S, D]."""
    if sdpa:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal and q.shape[-2] > 1:
        t, s = scores.shape[-2] // (HEADS // KV_HEADS), scores.shape[-1]
        pos = torch.arange(t).repeat(HEADS // KV_HEADS) + (s - t)  # bottom-right aligned
        scores = scores.masked_fill(torch.arange(s)[None, :] > pos[:, None], float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def time_case(requests, tokens, context, causal, dtype, repeats, warmup, sdpa):
    group = HEADS // KV_HEADS
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(requests, KV_HEADS, group * tokens, HEAD_SIZE, generator=gen).to(dtype)
    k = torch.randn(requests, KV_HEADS, context, HEAD_SIZE, generator=gen).to(dtype)
    v = torch.randn(requests, KV_HEADS, context, HEAD_SIZE, generator=gen).to(dtype)
    times = []
    with torch.no_grad():
        for i in range(warmup + repeats):
            start = time.perf_counter()
            attention(q, k, v, causal, sdpa)
            if i >= warmup:
                times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), times


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--sdpa", action="store_true", help="scaled_dot_product_attention (2.0+)")
    parser.add_argument("--filter", default="", help="only cases whose name contains this")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    results = []
    for name, requests, tokens, context, causal in CASES:
        if args.filter not in name:
            continue
        median, times = time_case(requests, tokens, context, causal, dtype, args.repeats,
                                  args.warmup, args.sdpa)
        print(f"{name:28s} torch {torch.__version__} {args.dtype}: {median:9.3f} ms", flush=True)
        results.append({"case": name, "median_ms": median, "times_ms": times})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"peer": f"torch {torch.__version__}", "dtype": args.dtype,
                       "threads": args.threads, "method": "sdpa" if args.sdpa else "matmul-softmax",
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
