"""NaN propagates as in the math (and in PyTorch and FlashAttention): a NaN in a query row, or in a key
or value that row sees, gives NaN in that output row; rows that do not read it stay finite, and keys
outside a request's context are never read (NaN there changes nothing). Through both drop-ins."""
import unittest

import conformance as cf
from conformance import torch
from pagedattn import flashinfer_compat as fi
from pagedattn import vllm_compat as vc

H, HKV, D, BS = 4, 2, 64, 16


@cf.needs_torch
class NanPropagates(unittest.TestCase):
    def setUp(self):
        gen = torch.Generator().manual_seed(0)
        self.k = torch.randn(8, BS, HKV, D, generator=gen)
        self.v = torch.randn(8, BS, HKV, D, generator=gen)
        self.q = torch.randn(2, H, D, generator=gen)  # one decode token per request
        self.table = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
        self.lens = torch.tensor([20, 30], dtype=torch.int32)

    def vllm(self):
        return vc.flash_attn_varlen_func(self.q, self.k, self.v, 1, cf.offsets([1, 1]), 30, seqused_k=self.lens,
                                         block_table=self.table, causal=True)

    def flashinfer(self):
        wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(torch.zeros(16, dtype=torch.uint8), "NHD")
        wrapper.plan(torch.tensor([0, 2, 4], dtype=torch.int32), self.table.flatten(),
                     torch.tensor([4, 14], dtype=torch.int32), H, HKV, D, BS, q_data_type=torch.float32)
        return wrapper.run(self.q, torch.stack([self.k, self.v], dim=1))

    def flashinfer_rope_small_pages(self):
        """The same step as FlashInfer pages of 4 tokens under ROPE_LLAMA (keys gathered and turned)."""
        pages = torch.stack([self.k, self.v], dim=1).reshape(8, 2, 4, 4, HKV, D).transpose(1, 2).reshape(32, 2, 4,
                                                                                                          HKV, D)
        indices = torch.tensor([0, 1, 2, 3, 4] + list(range(8, 16)), dtype=torch.int32)  # page p = block p // 4
        wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(torch.zeros(16, dtype=torch.uint8), "NHD")
        wrapper.plan(torch.tensor([0, 1, 2], dtype=torch.int32), torch.tensor([0, 5, 13], dtype=torch.int32),
                     indices, torch.tensor([4, 2], dtype=torch.int32), H, HKV, D, 4, causal=True,
                     pos_encoding_mode="ROPE_LLAMA", q_data_type=torch.float32)
        return wrapper.run(self.q, pages)

    def check(self, nan_heads):
        """Request 0's heads in nan_heads are NaN (all of the row), everything else finite."""
        for name, run in (("vllm", self.vllm), ("flashinfer", self.flashinfer),
                          ("flashinfer rope, pages of 4", self.flashinfer_rope_small_pages)):
            out = run()
            for h in range(H):
                row = out[0, h]
                if h in nan_heads:
                    self.assertTrue(bool(row.isnan().all()), "%s: head %d should be NaN" % (name, h))
                else:
                    self.assertTrue(bool(row.isfinite().all()), "%s: head %d should be finite" % (name, h))
            self.assertTrue(bool(out[1].isfinite().all()), "%s: request 1 reads no NaN" % name)

    def test_nan_in_a_query(self):
        self.q[0, 1, 5] = float("nan")
        self.check({1})

    def test_nan_in_a_key_the_row_sees(self):
        self.k[1, 2, 0, 7] = float("nan")  # request 0's key 18, KV head 0 (query heads 0 and 1)
        self.check({0, 1})

    def test_nan_in_a_value_the_row_sees(self):
        self.v[0, 3, 1, :] = float("nan")  # request 0's value 3, KV head 1 (query heads 2 and 3)
        self.check({2, 3})

    def test_nan_outside_the_context_is_never_read(self):
        self.k[1, 4:, :, :] = float("nan")  # request 0 has 20 keys: slots 4.. of its second block are unused
        self.v[1, 4:, :, :] = float("nan")
        self.check(set())


if __name__ == "__main__":
    unittest.main()
