"""Arrays cross without copies: the library reads and writes the caller's memory (slices with an
offset, strided views, capsules, PyTorch tensors through their attributes or their capsules), and
every borrowed DLPack tensor goes back to its producer (no reference left behind)."""
import sys
import unittest

import numpy as np

import fake_dlpack
import pagedattn as pa
from test_bad_arguments import step

try:
    import torch
except ImportError:
    torch = None


class NoCopies(unittest.TestCase):
    def setUp(self):
        self.impl, self.builder, self.meta, self.a = step()
        self.md = self.builder.build(0, self.meta)
        self.a["kv_cache"][...] = np.random.default_rng(1).standard_normal(self.a["kv_cache"].shape)

    def forward(self, output, query=None, **arrays):
        a = dict(self.a, **arrays)
        self.impl.forward(a["query"] if query is None else query, a["key"], a["value"], a["kv_cache"], self.md,
                          output)

    def reference(self):
        out = np.zeros_like(self.a["output"])
        self.forward(out)
        return out

    def test_output_written_in_place_through_an_offset_view(self):
        want = self.reference()
        big = np.full((5,) + want.shape, np.nan, np.float32)
        self.forward(big[2])  # a view starting mid-buffer (DLPack byte offset / data pointer)
        np.testing.assert_array_equal(big[2], want)
        self.assertTrue(np.isnan(big[[0, 1, 3, 4]]).all(), "nothing written outside the view")

    def test_strided_query_and_cache(self):
        want = self.reference()
        wide = np.zeros((self.a["query"].shape[0], 2 * self.a["query"].shape[1], self.a["query"].shape[2]),
                        np.float32)
        wide[:, ::2] = self.a["query"]  # heads at a stride of 2: still a unit head dim
        out = np.zeros_like(want)
        self.forward(out, query=wide[:, ::2])
        np.testing.assert_array_equal(out, want)

    def test_cache_update_writes_the_callers_cache(self):
        cache = np.zeros_like(self.a["kv_cache"])
        self.impl.do_kv_cache_update(self.a["key"], self.a["value"], cache, self.meta.slot_mapping)
        slots = self.meta.slot_mapping
        flat = cache.reshape(cache.shape[0], 2, -1, *cache.shape[3:])
        written = flat[slots // 16, 0, slots % 16]
        np.testing.assert_array_equal(written, self.a["key"])

    def test_capsules_and_references(self):
        want = self.reference()
        out = np.zeros_like(want)
        before = sys.getrefcount(self.a["query"]), sys.getrefcount(out)
        for _ in range(3):
            self.forward(out.__dlpack__(), query=self.a["query"].__dlpack__())
        self.assertEqual((sys.getrefcount(self.a["query"]), sys.getrefcount(out)), before,
                         "each borrowed array was handed back to NumPy")
        np.testing.assert_array_equal(out, want)

    def test_host_view_from_another_producer(self):
        want = self.reference()
        out = np.zeros_like(want)
        fake = fake_dlpack.FakeTensor(out)  # a producer without a deleter, on the CPU
        self.forward(fake)
        np.testing.assert_array_equal(fake.backing, want)

    @unittest.skipIf(torch is None, "torch not importable")
    def test_torch_tensors_and_torch_capsules(self):
        want = self.reference()
        q = torch.from_numpy(self.a["query"])
        out = torch.zeros(want.shape)
        self.forward(out, query=q)
        np.testing.assert_array_equal(out.numpy(), want)
        out.zero_()
        self.forward(out.__dlpack__(), query=q.__dlpack__())  # PyTorch's own DLPack export
        np.testing.assert_array_equal(out.numpy(), want)
        big = torch.full((3,) + want.shape, float("nan"))
        self.forward(big[1], query=q)
        np.testing.assert_array_equal(big[1].numpy(), want)

    @unittest.skipIf(torch is None, "torch not importable")
    def test_torch_unsupported_dtype(self):
        with self.assertRaisesRegex(ValueError, "query: dtype torch.float64 is not supported"):
            self.forward(self.a["output"], query=torch.from_numpy(self.a["query"]).double())


if __name__ == "__main__":
    unittest.main()
