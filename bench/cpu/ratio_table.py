#!/usr/bin/python3
"""The ratio table of scripts/bench_cpu.sh: `pagedattn bench --json` and peer_torch.py --json of
one run, case by case: our median, PyTorch's, how many times faster we are, and our share of the
ceilings measured in the same run."""
import json
import sys


def main(ours_path, peer_path):
    ours = json.load(open(ours_path))
    peer = {r["case"]: r["median_ms"] for r in json.load(open(peer_path))["results"]}
    ceilings = ours["ceilings"]
    print(f"ceilings: {json.dumps(ceilings)}")
    print(f"{'case':30s} {'ours ms':>9s} {'torch ms':>9s} {'x torch':>8s} {'% read':>7s} {'% peak':>7s}")
    for r in ours["results"]:
        theirs = peer.get(r["case"])
        ratio = f"{theirs / r['median_ms']:8.2f}" if theirs else f"{'-':>8s}"
        theirs_text = f"{theirs:9.3f}" if theirs else f"{'-':>9s}"
        print(f"{r['case']:30s} {r['median_ms']:9.3f} {theirs_text} {ratio} "
              f"{100 * r.get('fraction_of_bandwidth', 0):6.0f}% {100 * r.get('fraction_of_compute', 0):6.0f}%")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
