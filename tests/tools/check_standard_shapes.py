"""`pagedattn bench --suite standard` runs exactly the shapes of peer_sdpa.py --suite standard.

  python3 check_standard_shapes.py PAGEDATTN_CLI PEER_SDPA_PY
Reads the peer's PREFILL and DECODE tables from its source (importing it would import torch) and
compares them, in order, with `bench --suite standard --list`: each prefill shape non-causal then
causal at block 128, each decode shape at block 16.
"""
import ast
import re
import subprocess
import sys


def peer_tables(path):
    tables = {}
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            name = getattr(node.targets[0], "id", None)
            if name in ("PREFILL", "DECODE"):
                tables[name] = ast.literal_eval(node.value)["standard"]
    return tables["PREFILL"], tables["DECODE"]


def main(cli, peer):
    prefill, decode = peer_tables(peer)
    want = [("prefill", B, S, Hq, Hkv, D, causal, 128) for (B, S, Hq, Hkv, D) in prefill for causal in (0, 1)]
    want += [("decode", B, L, Hq, Hkv, D, 1, 16) for (B, L, Hq, Hkv, D) in decode]
    text = subprocess.run([cli, "bench", "--suite", "standard", "--list", "--backend", "cpu"], check=True,
                          capture_output=True, text=True).stdout
    pattern = re.compile(r"^\S+ (\w+) B=(\d+) S=(\d+) Hq=(\d+) Hkv=(\d+) D=(\d+) causal=(\d) block=(\d+)$")
    got = [(m[1], *map(int, m.groups()[1:])) for m in map(pattern.match, text.splitlines()) if m]
    if got != want:
        print("the standard suite differs from the peer's:\n  ours:  %s\n  peer:  %s" % (got, want))
        return 1
    print(f"standard suite: the peer's {len(prefill)} prefill shapes (x2 causal) and {len(decode)} decode shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
