#!/usr/bin/env python3
"""Joins `pagedattn bench --suite standard` JSON with peer_sdpa.py's JSON lines into one table.

Inputs (any number, any order; the kind of each is recognised from its contents):
  - a `pagedattn bench --json` document (an object with "results");
  - peer_sdpa.py --json output (one JSON object per line);
  - a bundle, as scripts/bench_standard.sh writes it: {"pagedattn": [documents], "peer": [rows]}.
Writes a markdown report (stdout, or --markdown FILE): per standard shape and block size, ours per
backend and kernel generation, sdpa_flash and sdpa_cudnn, with each of ours as a ratio to cuDNN
(time over time, so both sides count the same work); then the overhead suite's figures when
present. --plot FILE.png draws the roofline (needs matplotlib): arithmetic intensity against
achieved TFLOP/s, log-log, under the bf16 matmul and copy ceilings the peer measured.

  python3 tools/bench_report.py standard.json peer.json --markdown table.md --plot roofline.png
"""
import argparse
import json
import sys

PEERS = ("sdpa_flash", "sdpa_cudnn")
BYTES_BF16 = 2


def load(path):
    """Returns (our documents, peer rows) found in one file."""
    with open(path) as f:
        text = f.read()
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and "results" in whole:
        return [whole], []
    if isinstance(whole, dict) and ("pagedattn" in whole or "peer" in whole):
        return list(whole.get("pagedattn", [])), list(whole.get("peer", []))
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"{path}: neither a pagedattn bench document nor peer JSON lines")
    return [], rows


def shape_key(kind, B, S, Hq, Hkv, D, causal):
    return (kind, B, S, Hq, Hkv, D, bool(causal) if kind == "prefill" else False)


def shape_flops_bytes(key):
    """Attention's work and its least traffic for a shape: Q, K, V read once, O written once (bf16).
    Causal prefill counts half the pairs, as the peer does."""
    kind, B, S, Hq, Hkv, D, causal = key
    if kind == "prefill":
        flops = 4.0 * B * Hq * S * S * D / (2 if causal else 1)
        nbytes = BYTES_BF16 * B * S * D * (2 * Hq + 2 * Hkv)
    else:  # decode: one query token per request over S keys
        flops = 4.0 * B * Hq * S * D
        nbytes = BYTES_BF16 * B * D * (2 * Hq + 2 * Hkv * S)
    return flops, nbytes


def variant_name(row):
    """A column per backend and generation asked for: 'FLASH_ATTN v2', 'FLASHINFER auto'."""
    asked = row.get("variant", "")
    generation = asked.split(":", 1)[1] if ":" in asked else "auto"
    return f"{row.get('backend') or asked.split(':')[0]} {generation}"


def collect(docs, peer_rows):
    """ours[(shape, block)][variant] = row; peers[shape][peer] = row; ceilings; other rows."""
    ours, peers, extra = {}, {}, []
    ceilings = {}
    for doc in docs:
        for r in doc.get("results", []):
            # The peer's shapes are bf16 with a bf16 cache; anything else is listed apart.
            like_peer = r.get("dtype", "bf16") == "bf16" and r.get("kv_cache_dtype", "auto") == "auto"
            if (r.get("measure", "forward") != "forward" or r.get("kind") not in ("prefill", "decode")
                    or r.get("part_of") or not like_peer):
                extra.append(r)
                continue
            key = shape_key(r["kind"], r["B"], r["S"], r["Hq"], r["Hkv"], r["D"], r["causal"])
            # The first run of a shape, block and variant is the one shown.
            ours.setdefault((key, r["block_size"]), {}).setdefault(variant_name(r), r)
        c = doc.get("ceilings", {})
        ceilings.setdefault("ours_read_GBps", c.get("read_bandwidth_gbps"))
        ceilings.setdefault("ours_compute_TFLOPs", (c.get("compute_gflops") or 0) / 1e3 or None)
    for r in peer_rows:
        if r.get("kind") == "ceiling":
            ceilings[r["what"]] = r["value"]
        elif r.get("kind") in ("prefill", "decode") and r.get("peer") in PEERS and "ms" in r:
            S = r["S"] if r["kind"] == "prefill" else r["ctx"]
            key = shape_key(r["kind"], r["B"], S, r["Hq"], r["Hkv"], r["D"], r.get("causal", False))
            peers.setdefault(key, {})[r["peer"]] = r
    return ours, peers, ceilings, extra


def fmt(x):
    """Three significant figures for small rates (CPU), whole numbers for large ones (GPU)."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def our_value(row):
    """Our rate in the table's unit: TFLOP/s for prefill, GB/s of K+V for decode."""
    return row["tflops"] if row["kind"] == "prefill" else row["kv_gbps"]


def peer_value(row):
    return row["TFLOPs"] if row["kind"] == "prefill" else row["GBps"]


def shape_label(key):
    kind, B, S, Hq, Hkv, D, causal = key
    what = ("causal" if causal else "non-causal") if kind == "prefill" else f"ctx {S}"
    length = f"x{S}" if kind == "prefill" else ""
    return f"{kind} {B}{length}, {Hq}/{Hkv} heads, D {D}, {what}"


def ordered_shapes(ours, peers):
    """The peer's order (its suite's), then any shape only we ran."""
    order = list(peers)
    for key, _ in ours:
        if key not in order:
            order.append(key)
    return order


def standard_table(ours, peers):
    variants = list(dict.fromkeys(v for cells in ours.values() for v in cells))  # as run
    head = ["shape", "block", "unit", *variants, *PEERS, "best ours / cuDNN"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    joined = []
    for key in ordered_shapes(ours, peers):
        blocks = sorted({b for k, b in ours if k == key}) or [None]
        peer = peers.get(key, {})
        cudnn_ms = peer.get("sdpa_cudnn", {}).get("ms")
        for block in blocks:
            cells = ours.get((key, block), {})
            row = [shape_label(key), str(block or "-"), "TFLOP/s" if key[0] == "prefill" else "GB/s"]
            best = None
            for v in variants:
                r = cells.get(v)
                if r is None:
                    row.append("-")
                    continue
                if "error" in r:
                    row.append("error")
                    continue
                text = fmt(our_value(r))
                asked = v.split(" ", 1)[1]
                if asked == "auto" and r.get("generation"):
                    text += f" ({r['generation']})"
                if cudnn_ms:
                    ratio = cudnn_ms / r["median_ms"]
                    text += f", {ratio:.2f}x"
                    best = ratio if best is None else max(best, ratio)
                row.append(text)
                joined.append({"shape": list(key), "block_size": block, "variant": v,
                               "ms": r["median_ms"], "value": our_value(r),
                               "generation": r.get("generation"),
                               "ratio_to_cudnn": cudnn_ms / r["median_ms"] if cudnn_ms else None})
            for p in PEERS:
                pr = peer.get(p)
                row.append(fmt(peer_value(pr)) if pr else "-")
            row.append(f"{best:.2f}" if best is not None else "-")
            lines.append("| " + " | ".join(row) + " |")
    return lines, joined


def overhead_sections(docs, extra):
    lines = []
    ratios = [r for doc in docs for r in doc.get("part_ratios", [])]
    if ratios:
        lines += ["", "Mixed batch against its parts alone (forward, device time):", "",
                  "| batch | backend | block | together ms | parts alone ms | ratio |", "|---|---|---|---|---|---|"]
        for r in ratios:
            parts = " + ".join(f"{name} {ms:.3f}" for name, ms in r["parts_ms"].items())
            lines.append(f"| {r['batch']} | {r['backend_label']} | {r['block_size']} | "
                         f"{r['batch_ms']:.3f} | {parts} | {r['ratio']:.3f} |")
    in_ratios = {r["batch"] for r in ratios}
    others = [r for r in extra if r.get("measure", "forward") == "forward" and "error" not in r
              and not r.get("part_of") and r["case"] not in in_ratios]
    if others:
        lines += ["", "Other cases (forward, device time):", "",
                  "| case | backend | block | KV cache | ms | TFLOP/s | KV GB/s |", "|---|---|---|---|---|---|---|"]
        for r in others:
            lines.append(f"| {r['case']} | {r['backend_label']} | {r['block_size']} | "
                         f"{r.get('kv_cache_dtype', 'auto')} | {r['median_ms']:.3f} | {fmt(r['tflops'])} | "
                         f"{fmt(r['kv_gbps'])} |")
    launches = [r for r in extra if r.get("measure") == "launch" and "error" not in r]
    if launches:
        lines += ["", "forward launch overhead per layer: host time per call issued while the device is held "
                  "busy, the device's time per call run back to back, and the wall time per call run freely:", "",
                  "| case | backend | host us/forward | device us/forward | free-running us/forward | host-bound |",
                  "|---|---|---|---|---|---|"]
        for r in launches:
            held = "" if r.get("device_held", True) else " (device not held to the end)"
            lines.append(f"| {r['case']} | {r['backend_label']} | {r['host_us_per_forward']:.2f}{held} | "
                         f"{r['device_us_per_forward']:.2f} | {r['wall_us_per_forward']:.2f} | "
                         f"{'yes' if r['host_bound'] else 'no'} |")
    builds = [r for r in extra if r.get("measure") == "build" and "error" not in r]
    if builds:
        lines += ["", "build() host time (median):", "", "| case | backend | requests | us |", "|---|---|---|---|"]
        for r in builds:
            lines.append(f"| {r['case']} | {r['backend_label']} | {r['B']} | {r['build_us']:.2f} |")
    errors = [r for doc in docs for r in doc.get("results", []) if "error" in r]
    if errors:
        lines += ["", "Cases that did not run:", ""]
        lines += [f"- {r['case']} on {r.get('variant')}: {r['error']}" for r in errors]
    return lines


def plot_roofline(path, ours, peers, ceilings):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    peak = ceilings.get("bf16_matmul_TFLOPs") or ceilings.get("ours_compute_TFLOPs")
    bandwidth = ceilings.get("copy_GBps") or ceilings.get("ours_read_GBps")
    series = {}  # label -> [(intensity, TFLOP/s)]

    def add(label, key, ms):
        flops, nbytes = shape_flops_bytes(key)
        series.setdefault(label, []).append((flops / nbytes, flops / ms / 1e9))

    for (key, block), cells in ours.items():
        for v, r in cells.items():
            if "error" in r:
                continue
            backend, asked = v.split(" ", 1)
            gen = r.get("generation") or asked
            label = backend if backend != "FLASH_ATTN" else f"FLASH_ATTN {'v2' if gen == 'v2' else 'v3' if 'v3' in gen else gen}"
            usual = 128 if key[0] == "prefill" else 16  # the standard suite's block sizes
            add(label if block == usual else f"{label}, block {block}", key, r["median_ms"])
    for key, cells in peers.items():
        for p, r in cells.items():
            add(p, key, r["ms"])
    fig, ax = plt.subplots(figsize=(8, 5.5))
    markers = "osD^v<>ph*"
    for i, (label, points) in enumerate(sorted(series.items())):
        xs, ys = zip(*points)
        ax.scatter(xs, ys, marker=markers[i % len(markers)], label=label, alpha=0.8)
    xs = [x for pts in series.values() for x, _ in pts] or [1.0, 1000.0]
    lo, hi = min(xs) / 2, max(xs) * 2
    if peak and bandwidth:
        knee = peak * 1e3 / bandwidth  # FLOP/byte where the copy roof meets the matmul roof
        grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        ax.plot(grid, [min(peak, x * bandwidth / 1e3) for x in grid], "k-", lw=1,
                label=f"roof: {fmt(peak)} TFLOP/s bf16 matmul, {fmt(bandwidth)} GB/s copy (knee {fmt(knee)})")
    read = ceilings.get("ours_read_GBps")
    if peak and read:  # decode reads more than it writes: its roof is the read bandwidth
        grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        ax.plot(grid, [min(peak, x * read / 1e3) for x in grid], "k--", lw=0.8,
                label=f"{fmt(read)} GB/s read (pagedattn bench's probe)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of Q, K, V, O)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title("Attention on the standard shapes: ours (paged) and PyTorch SDPA (dense)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")  # above the roof: nothing to hide
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="pagedattn bench JSON, peer JSON lines, or a bundle")
    ap.add_argument("--markdown", help="write the report here (default: stdout)")
    ap.add_argument("--plot", help="draw the roofline into this PNG (needs matplotlib)")
    ap.add_argument("--json", help="write the joined rows (ours with their ratio to cuDNN) here")
    args = ap.parse_args(argv)
    docs, peer_rows = [], []
    for path in args.inputs:
        d, p = load(path)
        docs += d
        peer_rows += p
    ours, peers, ceilings, extra = collect(docs, peer_rows)
    lines, joined = standard_table(ours, peers)
    device = next((r["device"] for r in peer_rows if "device" in r and "kind" not in r), None)
    header = [f"Peers on {device} (torch {next((r.get('torch') for r in peer_rows if 'torch' in r), '?')})"
              if device else "No peer rows given.",
              "Ceilings: " + ", ".join(f"{k} {fmt(v)}" for k, v in ceilings.items() if v), ""]
    report = "\n".join(header + lines + overhead_sections(docs, extra)) + "\n"
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(report)
    else:
        sys.stdout.write(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(joined, f, indent=1)
    if args.plot:
        try:
            plot_roofline(args.plot, ours, peers, ceilings)
        except ImportError as ex:
            print(f"bench_report: no plot ({ex}); install matplotlib (python3-matplotlib)", file=sys.stderr)
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
