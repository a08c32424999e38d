"""tools/bench_report.py on fixtures (tests/tools/fixtures): our bench JSON documents for the standard
and overhead suites and peer_sdpa.py JSON lines with the shapes they share, one only the peer ran, a
FlexAttention row and a peer error (both left out), and one of our cases that did not run."""
import importlib.util
import json
import os
import pathlib
import re
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
spec = importlib.util.spec_from_file_location("bench_report", HERE.parent.parent / "tools" / "bench_report.py")
bench_report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_report)

INPUTS = [str(FIXTURES / n) for n in ("bench_standard.json", "bench_overhead.json", "peer.jsonl")]


def read(path):
    with open(path) as f:
        return f.read()


def report(*extra):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "report.md")
        rc = bench_report.main([*INPUTS, "--markdown", out, *extra])
        return rc, read(out)


def table_row(text, shape):
    """The cells of the standard table's row for `shape` (the shape label's start)."""
    for line in text.splitlines():
        if line.startswith("| " + shape):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"no row for {shape!r} in:\n{text}")


class BenchReportTest(unittest.TestCase):
    def test_columns_are_ours_in_run_order_then_the_peers(self):
        _, text = report()
        header = next(l for l in text.splitlines() if l.startswith("| shape"))
        self.assertEqual([c.strip() for c in header.strip("|").split("|")],
                         ["shape", "block", "unit", "FLASH_ATTN v2", "FLASH_ATTN auto", "FLASHINFER auto",
                          "sdpa_flash", "sdpa_cudnn", "best ours / cuDNN"])

    def test_ratio_to_cudnn_is_time_over_time(self):
        _, text = report()
        # Non-causal 1 x 8192: cuDNN 2.0 ms; ours 3.2 (v2), 1.6 (auto, ran v3), 3.0 (FLASHINFER).
        row = table_row(text, "prefill 1x8192, 32/8 heads, D 128, non-causal")
        self.assertEqual(row[1:3], ["128", "TFLOP/s"])
        self.assertRegex(row[3], r"^344, 0\.62x$")  # 4*32*8192^2*128 / 3.2 ms; 2.0 / 3.2
        self.assertRegex(row[4], r"^687 \(v3\), 1\.25x$")  # the generation used is shown for auto
        self.assertRegex(row[5], r", 0\.67x$")
        self.assertEqual(row[6:], ["333", "550", "1.25"])  # peers as they reported; the best ratio

    def test_a_case_that_did_not_run_says_so(self):
        _, text = report()
        row = table_row(text, "prefill 1x8192, 32/8 heads, D 128, causal")
        self.assertEqual(row[5], "error")
        self.assertEqual(row[-1], "1.11")  # 1.0 / 0.9: the best of those that ran
        self.assertIn("- prefill_1x8192_h32-8_d128_causal on flashinfer:auto: v3 cannot run", text)

    def test_decode_is_in_gb_per_second(self):
        _, text = report()
        row = table_row(text, "decode 64, 32/8 heads, D 128, ctx 4096")
        self.assertEqual(row[1:3], ["16", "GB/s"])
        self.assertTrue(row[3].startswith("3977, 1.11x"), row)  # 1 GiB of K+V / 0.27 ms; 0.30 / 0.27
        self.assertEqual(row[6:8], ["2386", "3579"])

    def test_other_cache_dtypes_are_listed_apart(self):
        _, text = report()
        row = table_row(text, "decode 64, 32/8 heads, D 128, ctx 4096")
        self.assertTrue(row[5].startswith("4295 "), row)  # the bf16 cache's, not the FP8 one's
        self.assertRegex(text, r"Other cases .*\n\n.*\n.*\n\| fp8_e4m3_decode_64x4096 \| FLASHINFER \(decode\+v2\) \| "
                               r"16 \| fp8_e4m3 \| 0\.150 \| [0-9.]+ \| 3579 \|")

    def test_shapes_only_the_peer_ran_and_rows_left_out(self):
        _, text = report()
        row = table_row(text, "prefill 4x2048")
        self.assertEqual(row[3:], ["-", "-", "-", "-", "550", "-"])
        self.assertNotIn("440", text)  # the flex row
        self.assertNotIn("D 64", text)  # the peer's error row has no timing

    def test_overhead_figures(self):
        _, text = report()
        self.assertRegex(text, r"\| mixed_64x4096\+chunk2048@2048 \| FLASHINFER \(decode\+v2\) \| 16 \| 0\.660 \| "
                               r"chunk2048@2048 0\.350 \+ decode_64x4096 0\.250 \| 1\.100 \|")
        self.assertRegex(text, r"\| launch_decode_4x256 \| FLASHINFER \(decode\+v2\) \| 6\.50 \| 4\.25 \| 6\.60 \| yes \|")
        self.assertRegex(text, r"\| launch_decode_4x256 \| FLASH_ATTN \(v2\) \| 7\.00 \(device not held to the end\) \| "
                               r"9\.50 \| 9\.60 \| no \|")
        self.assertRegex(text, r"\| build_decode_256x64-512 \| FLASHINFER \(decode\+v2\) \| 256 \| 21\.50 \|")
        # The mixed batch's part is not a standard-table row of its own.
        self.assertEqual(len(re.findall(r"^\| decode 64,", text, re.M)), 1)

    def test_a_bundle_gives_the_same_report(self):
        _, separate = report()
        with tempfile.TemporaryDirectory() as tmp:
            bundle = os.path.join(tmp, "bundle.json")
            docs = [json.loads(read(p)) for p in INPUTS[:2]]
            peer = [json.loads(line) for line in read(INPUTS[2]).splitlines()]
            with open(bundle, "w") as f:
                json.dump({"pagedattn": docs, "peer": peer}, f)
            out = os.path.join(tmp, "r.md")
            self.assertEqual(bench_report.main([bundle, "--markdown", out]), 0)
            self.assertEqual(read(out), separate)

    def test_joined_json(self):
        with tempfile.TemporaryDirectory() as tmp:
            joined = os.path.join(tmp, "joined.json")
            report("--json", joined)
            rows = json.loads(read(joined))
        auto = [r for r in rows if r["variant"] == "FLASH_ATTN auto" and r["shape"][0] == "prefill"
                and not r["shape"][-1]]
        self.assertEqual(len(auto), 1)
        self.assertAlmostEqual(auto[0]["ratio_to_cudnn"], 2.0 / 1.6)
        self.assertEqual(auto[0]["generation"], "v3")

    def test_not_a_report_input(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write("[1, 2]\n")
        try:
            with self.assertRaises(ValueError):
                bench_report.load(f.name)
        finally:
            os.unlink(f.name)

    def test_roofline_png(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("matplotlib is not installed (python3-matplotlib): the roofline PNG is not drawn")
        with tempfile.TemporaryDirectory() as tmp:
            png = os.path.join(tmp, "roofline.png")
            rc, _ = report("--plot", png)
            self.assertEqual(rc, 0)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertGreater(os.path.getsize(png), 10000)

    def test_roofline_points(self):
        # Intensity: prefill 1 x 8192, 32/8 heads, D 128, non-causal: 4 S^2 Hq D FLOP over
        # 2 bytes x S x D x (2 Hq + 2 Hkv); decode: Hq / Hkv FLOP per byte of K+V (plus Q and O).
        key = ("prefill", 1, 8192, 32, 8, 128, False)
        flops, nbytes = bench_report.shape_flops_bytes(key)
        self.assertAlmostEqual(flops / nbytes, 4 * 8192 * 32 / (2 * 80))
        flops, nbytes = bench_report.shape_flops_bytes(("decode", 64, 4096, 32, 8, 128, False))
        self.assertAlmostEqual(flops / nbytes, 4 * 32 * 4096 / (2 * (64 + 16 * 4096)))


if __name__ == "__main__":
    unittest.main()
