"""Every case file (the shared ones and the project's own) re-run through the Python API on the CPU
backend, in NumPy and in PyTorch arrays, must match the C++ `pagedattn check` run of the same case
bit for bit: the cache after do_kv_cache_update, the output and the LSE."""
import unittest

import numpy as np

import case_dumps

FRAMES = ["numpy"]
try:
    import torch  # noqa: F401

    FRAMES.append("torch")
except ImportError:
    pass

NUMPY_DTYPES = ("f32", "f16")  # NumPy has no bfloat16: bf16 cases run in PyTorch only


class CasesMatchCpp(unittest.TestCase):
    def test_every_case(self):
        ran = 0
        for name, dump in case_dumps.dumps():
            self.assertTrue(dump.meta["pass"], "the C++ check of %s failed" % name)
            for frame_name in FRAMES:
                if frame_name == "numpy" and dump.case["dtype"] not in NUMPY_DTYPES:
                    continue
                with self.subTest(case=name, frame=frame_name):
                    self.check(case_dumps.Frame(frame_name), dump)
                    ran += 1
                    print("%-28s %-6s matches C++ (%s)" % (name, frame_name, dump.meta["backend"]))
        if "torch" not in FRAMES:
            print("skipped: PyTorch arrays (torch not importable)")
        self.assertGreater(ran, 0)

    def check(self, frame, dump):
        selection, cache, output, lse = case_dumps.run_step(frame, dump)
        self.assertEqual(selection.backend.name, dump.meta["backend"])
        want_cache = dump.load("kv_cache_raw") if dump.fp8 else dump.load("kv_cache")
        np.testing.assert_array_equal(cache, want_cache, "cache after do_kv_cache_update")
        np.testing.assert_array_equal(output, dump.load("output"), "output")
        np.testing.assert_array_equal(lse, dump.load("lse"), "lse")


if __name__ == "__main__":
    unittest.main()
