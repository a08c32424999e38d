"""pagedattn.torch_ops: on PyTorch without torch.library.custom_op (Debian's 1.13) nothing is
registered and REASON says why; where it exists, torch.ops.pagedattn.* run and give the drop-ins'
results (the GPU acceptance script covers torch.compile on them)."""
import unittest

import numpy as np

from test_bad_arguments import BS, D, H, HKV, step

try:
    import torch
except ImportError:
    torch = None


@unittest.skipIf(torch is None, "torch not importable")
class TorchOps(unittest.TestCase):
    def test_registration(self):
        from pagedattn import torch_ops, vllm_compat

        has_custom_op = hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_fake")
        self.assertEqual(torch_ops.REGISTERED, has_custom_op)
        if not has_custom_op:
            self.assertIn("custom_op", torch_ops.REASON)
            print("skipped: torch.ops.pagedattn (%s)" % torch_ops.REASON)
            return
        _, _, meta, a = step()
        q = torch.from_numpy(a["query"])
        cache = torch.from_numpy(a["kv_cache"])
        qsl, seqs = torch.from_numpy(meta.query_start_loc), torch.from_numpy(meta.seq_lens)
        table = torch.from_numpy(meta.block_table_tensor)
        out, lse = torch.ops.pagedattn.flash_attn_varlen(q, cache[:, 0], cache[:, 1], qsl, seqs, table, 2, 20)
        want, want_lse = vllm_compat.flash_attn_varlen_func(q, cache[:, 0], cache[:, 1], 2, qsl, 20, seqused_k=seqs,
                                                            causal=True, block_table=table, return_softmax_lse=True)
        np.testing.assert_array_equal(out.numpy(), want.numpy())
        np.testing.assert_array_equal(lse.numpy(), want_lse.numpy())
        self.assertEqual((out.shape, lse.shape), ((q.shape[0], H, D), (H, q.shape[0])))
        self.assertEqual(cache.shape[2:], (BS, HKV, D))


if __name__ == "__main__":
    unittest.main()
