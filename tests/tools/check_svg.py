"""Checks the SVG plot of `pagedattn serve --plot` against the run's `--json`, with Python's XML parser.

  python3 check_svg.py PLOT.svg RUN.json
The plot parses as SVG; its text is text (the title, the axis names, the legend's three step kinds,
each backend's panel title); tick labels are plain numbers with the step axis starting at "0"; and
each backend's panel has one marker per step of its kind (circle decode-only, square mixed, triangle
prefill), counted from the JSON's per-step token counts. Exit 0 when all hold.
"""
import json
import re
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def kinds_of(per_step):
    counts = {"decode-only": 0, "mixed": 0, "prefill": 0}
    for tokens, prefill in zip(per_step["num_tokens"], per_step["prefill_tokens"]):
        kind = "decode-only" if prefill == 0 else "prefill" if prefill == tokens else "mixed"
        counts[kind] += 1
    return counts


def main(svg_path, json_path):
    root = ET.parse(svg_path).getroot()
    assert root.tag == NS + "svg", root.tag
    texts = [t.text for t in root.iter(NS + "text")]
    for label in ("decode-only step", "mixed step", "prefill step", "engine step",
                  "ms per step (log scale)"):
        assert label in texts, f"no text '{label}'"
    numbers = [t for t in texts if re.fullmatch(r"[0-9.eE+-]+", t)]
    assert "0" in numbers, "the step axis starts at 0"
    assert all(re.fullmatch(r"[0-9]+(\.[0-9]+)?", t) for t in numbers), f"labels {numbers}"
    markers = {"decode-only": len(root.findall(NS + "circle")),
               "mixed": len([r for r in root.findall(NS + "rect") if r.get("x") is not None]),
               "prefill": len(root.findall(NS + "polygon"))}
    want = {"decode-only": 1, "mixed": 1, "prefill": 1}  # the legend's
    for backend in json.load(open(json_path))["backends"]:
        counts = kinds_of(backend["per_step"])
        title = (f"{backend['backend']}: {sum(counts.values())} steps ({counts['decode-only']} "
                 f"decode-only, {counts['mixed']} mixed, {counts['prefill']} prefill)")
        assert any(t.startswith(title) for t in texts), f"no panel titled '{title}'"
        for kind, n in counts.items():
            want[kind] += n
    assert markers == want, f"markers {markers}, steps by kind (+ legend) {want}"
    print(f"{svg_path}: {len(texts)} texts, markers {markers}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
