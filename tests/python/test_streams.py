"""The drop-ins' stream= (ours): everything a call queues goes on that stream, the framework ops that
make its temporaries included. A call on a side stream while PyTorch's current stream is busy: an
FP8 query over an FP8 cache has its descales folded by a PyTorch product and is dequantized into a
temporary; both must be ready before the side stream's kernels read them."""
import unittest

import conformance as cf
from conformance import torch
from pagedattn import vllm_compat as vc
from pagedattn._arrays import on_callers_stream
from test_conformance_vllm import paged_inputs


class StreamArgument(unittest.TestCase):
    def test_the_call_is_unchanged_and_finds_a_positional_stream(self):
        seen = []

        @on_callers_stream
        def op(a, b=None, stream=None, *, c=None):
            seen.append(stream)
            return a, b, c

        self.assertEqual(op(1, 2, None, c=3), (1, 2, 3))
        self.assertEqual(op(1, c=4, stream=None), (1, None, 4))
        # No CUDA stream to make current here (CUDA not in use): the library is handed the value.
        self.assertEqual(op(5, 6, 0), (5, 6, None))
        self.assertEqual(seen, [None, None, 0])


@cf.needs_torch
class CallersStream(unittest.TestCase):
    @cf.needs_gpu
    def test_fp8_query_on_a_side_stream_while_the_current_stream_is_busy(self):
        if not hasattr(torch, "float8_e4m3fn"):
            self.skipTest("this PyTorch has no float8_e4m3fn")
        fp8 = torch.float8_e4m3fn
        q, k, v, query_lens, kv_lens, table = paged_inputs([(1, 523), (7, 300), (1, 37)], (8, 2), 128, 16, 256,
                                                           torch.float32, seed=3)
        q8, k8, v8 = (x.to(fp8) for x in (q, k, v))
        descales = {"q_descale": 0.75, "k_descale": 1.25, "v_descale": 0.5}
        scale = 128 ** -0.5
        want, _ = cf.paged_attention(q8.float() * 0.75, k8.float() * 1.25, v8.float() * 0.5, query_lens, kv_lens,
                                     table, True, scale)
        cu, seqused = cf.offsets(query_lens).cuda(), torch.tensor(kv_lens, dtype=torch.int32).cuda()
        schedule = vc.get_scheduler_metadata(len(kv_lens), max(query_lens), max(kv_lens), 8, 2, 128, seqused,
                                             qkv_dtype=torch.bfloat16, cu_seqlens_q=cu, page_size=16, causal=True)
        args = dict(q=q8.cuda(), k=k8.cuda(), v=v8.cuda(), cu_seqlens_q=cu, seqused_k=seqused,
                    max_seqlen_q=max(query_lens), max_seqlen_k=max(kv_lens), softmax_scale=scale, causal=True,
                    block_table=table.cuda(), scheduler_metadata=schedule,
                    **{name: torch.tensor([value]).cuda() for name, value in descales.items()})
        vc.flash_attn_varlen_func(**args)  # the layer's impl made now: its setup may synchronise
        # Every free block of the current stream's small pool holds NaN: a temporary made there and
        # read before the current stream has written it reads NaN.
        junk = [torch.full((2,), float("nan"), device="cuda") for _ in range(8192)]
        del junk
        side = torch.cuda.Stream()
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000_000)  # the current stream busy for about 0.1 s
        got = vc.flash_attn_varlen_func(**args, stream=side)
        torch.cuda.synchronize()
        cf.assert_close(self, got.cpu(), want, "bfloat16", "out")


if __name__ == "__main__":
    unittest.main()
