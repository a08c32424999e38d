"""vLLM's kernel-test contracts through pagedattn.vllm_compat, against the float64 reference in
conformance.py: flash_attn_varlen_func over a paged cache with K and V as two allocations and a
random block table (tests/kernels/attention/test_flash_attn.py's grid), cascade_attention
(test_cascade_flash_attn.py), merge_attn_states, reshape_and_cache_flash (test_cache.py: block sizes
from 1, f16/bf16/f32 sources, FP8 caches as uint8), get_scheduler_metadata as vLLM's builder calls it
(a copy in a persistent buffer, replayed with new lengths and tables), K and V at any distance, and
is_fa_version_supported. A sample of each grid runs here; PAGEDATTN_FULL_GRID=1 runs all of it."""
import unittest

import conformance as cf
from conformance import torch
from pagedattn import vllm_compat as vc


def paged_inputs(seq_lens, num_heads, head_size, block_size, num_blocks, dtype, seed):
    """vLLM's test inputs: q, K and V caches as two allocations (only the blocks the table reads are
    filled: the rest stays as torch.empty left it), lengths and a random table. Moved to a GPU, K and V
    land wherever its allocator puts them (KAndVAtAnyDistance places them on purpose)."""
    gen = torch.Generator().manual_seed(seed)
    query_lens, kv_lens = [s[0] for s in seq_lens], [s[1] for s in seq_lens]
    hq, hkv = num_heads
    q = torch.randn(sum(query_lens), hq, head_size, generator=gen).to(dtype)
    table = cf.random_table(len(seq_lens), kv_lens, block_size, num_blocks, gen)
    caches = [torch.empty(num_blocks, block_size, hkv, head_size, dtype=dtype) for _ in range(2)]
    used = table.unique().long()
    for cache in caches:
        cache[used] = torch.randn(len(used), block_size, hkv, head_size, generator=gen).to(dtype)
    return q, caches[0], caches[1], query_lens, kv_lens, table


class GridShards(unittest.TestCase):
    """PAGEDATTN_GRID_SHARD's shares of a grid: together every case once; a bad value named."""

    def test_the_shares_partition_the_grid(self):
        saved = cf.SHARD
        try:
            cases = []
            for i in range(3):
                cf.SHARD = (i, 3)
                cases += cf.grid("shards", 0, a=[1, 2, 3], b=[4, 5])
        finally:
            cf.SHARD = saved
        self.assertEqual(sorted((c["a"], c["b"]) for c in cases), [(a, b) for a in (1, 2, 3) for b in (4, 5)])

    def test_a_bad_share_is_named(self):
        self.assertEqual(cf.grid_shard("1/4"), (1, 4))
        self.assertEqual(cf.grid_shard(None), (0, 1))
        for text in ("4/4", "x/2", "1"):
            with self.assertRaisesRegex(ValueError, r"PAGEDATTN_GRID_SHARD = '%s' \(allowed: i/n" % text):
                cf.grid_shard(text)


@cf.needs_torch
class VarlenWithPagedKV(unittest.TestCase):
    """test_varlen_with_paged_kv: causal, GQA, head sizes 40 to 256, windows, soft caps, 32768 blocks."""

    def cases(self):
        return cf.grid("varlen", 0, use_out=[True, False],
                       seq_lens=[[(1, 1328), (5, 18), (129, 463)], [(1, 523), (1, 37), (1, 2011)]],
                       num_heads=[(4, 4), (8, 2)], head_size=[40, 72, 80, 128, 256], sliding_window=[None, 256],
                       dtype=["bfloat16", "float16"], soft_cap=[None, 50.0], num_blocks=[32768, 2048])

    def test_grid(self):
        for case in self.cases():
            with self.subTest(**case):
                self.check(**case)

    @cf.needs_gpu
    def test_grid_on_the_gpu(self):
        for case in self.cases():
            with self.subTest(**case):
                self.check(**case, device="cuda")

    def check(self, use_out, seq_lens, num_heads, head_size, sliding_window, dtype, soft_cap, num_blocks,
              device="cpu"):
        q, k, v, query_lens, kv_lens, table = paged_inputs(seq_lens, num_heads, head_size, 16, num_blocks,
                                                           cf.dtype(dtype), seed=head_size)
        q, k, v, table = (x.to(device) for x in (q, k, v, table))
        window = (sliding_window - 1, 0) if sliding_window is not None else (-1, -1)
        scale = head_size ** -0.5
        out = torch.empty_like(q) if use_out else None
        got = vc.flash_attn_varlen_func(q=q, k=k, v=v, out=out, cu_seqlens_q=cf.offsets(query_lens).to(device),
                                        seqused_k=torch.tensor(kv_lens, dtype=torch.int32, device=device),
                                        max_seqlen_q=max(query_lens), max_seqlen_k=max(kv_lens), softmax_scale=scale,
                                        causal=True, window_size=window, block_table=table,
                                        softcap=soft_cap if soft_cap is not None else 0, fa_version=None)
        if use_out:
            self.assertIs(got, out)
        want, _ = cf.paged_attention(q.cpu(), k.cpu(), v.cpu(), query_lens, kv_lens, table.cpu(), True, scale,
                                     window=window, softcap=soft_cap or 0.0)
        cf.assert_close(self, got.cpu(), want, dtype, "out")

    def test_a_block_named_twice_in_one_request(self):
        # vLLM's tables come from torch.randint: a request may name one block at two positions, and
        # attention reads it at each (here every other block of each request is its first one).
        for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
            with self.subTest(device=device):
                q, k, v, query_lens, kv_lens, table = paged_inputs([(1, 700), (37, 300)], (8, 2), 128, 16, 64,
                                                                   torch.bfloat16, seed=3)
                table[:, 1::2] = table[:, :1]
                q, k, v, table = (x.to(device) for x in (q, k, v, table))
                got = vc.flash_attn_varlen_func(q=q, k=k, v=v, cu_seqlens_q=cf.offsets(query_lens).to(device),
                                                seqused_k=torch.tensor(kv_lens, dtype=torch.int32, device=device),
                                                max_seqlen_q=37, max_seqlen_k=700, softmax_scale=0.1, causal=True,
                                                block_table=table)
                want, _ = cf.paged_attention(q.cpu(), k.cpu(), v.cpu(), query_lens, kv_lens, table.cpu(), True, 0.1)
                cf.assert_close(self, got.cpu(), want, "bfloat16", "out")

    def test_fp8_queries_need_torch_float8(self):
        q, k, v, query_lens, kv_lens, table = paged_inputs([(1, 40)], (4, 4), 64, 16, 8, torch.bfloat16, 0)
        with self.assertRaisesRegex(ValueError, r"q is torch uint8: FP8 queries must be torch float8_e4m3fn"):
            vc.flash_attn_varlen_func(q=q.view(torch.int16).to(torch.uint8), k=k, v=v,
                                      cu_seqlens_q=cf.offsets(query_lens), seqused_k=torch.tensor(kv_lens).int(),
                                      max_seqlen_q=1, max_seqlen_k=40, causal=True, block_table=table)

    @unittest.skipUnless(hasattr(torch, "float8_e4m3fn") if torch else False, "this PyTorch has no float8_e4m3fn")
    def test_fp8_queries_keys_and_values(self):
        # vLLM's FA3 FP8 path: q, k, v in e4m3 with descales [num_reqs, Hkv] (q's per request, the cache's
        # broadcast), out bf16; against the float64 attention of the dequantized inputs.
        for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
            for case in cf.grid("fp8_qkv", 0, seq_lens=[[(1, 1328), (5, 18), (129, 463)], [(1, 523), (1, 37)]],
                                num_heads=[(8, 2), (4, 4)], head_size=[64, 128, 256]):
                with self.subTest(device=device, **case):
                    self.check_fp8(device=device, **case)

    def check_fp8(self, seq_lens, num_heads, head_size, device):
        q, k, v, query_lens, kv_lens, table = paged_inputs(seq_lens, num_heads, head_size, 16, 2048,
                                                           torch.float32, seed=head_size)
        batch, hkv = len(seq_lens), num_heads[1]
        gen = torch.Generator().manual_seed(7)
        q_descale = torch.rand(batch, hkv, generator=gen) + 0.5
        # The cache's descales broadcast over requests on the device, as vLLM's expand() makes them.
        k_descale = (torch.rand(1, hkv, generator=gen) + 0.5).to(device).expand(batch, hkv)
        v_descale = (torch.rand(1, hkv, generator=gen) + 0.5).to(device).expand(batch, hkv)
        fp8 = torch.float8_e4m3fn
        q8, k8, v8 = (x.to(fp8) for x in (q, k, v))
        group = num_heads[0] // hkv
        token_scale = torch.repeat_interleave(q_descale, torch.tensor(query_lens), dim=0)
        q_real = q8.float() * torch.repeat_interleave(token_scale, group, dim=1).unsqueeze(-1)
        k_real = k8.float() * k_descale[0].cpu().view(1, 1, hkv, 1)
        v_real = v8.float() * v_descale[0].cpu().view(1, 1, hkv, 1)
        scale = head_size ** -0.5
        out = torch.empty(q.shape, dtype=torch.bfloat16, device=device)
        got = vc.flash_attn_varlen_func(q=q8.to(device), k=k8.to(device), v=v8.to(device), out=out,
                                        cu_seqlens_q=cf.offsets(query_lens).to(device),
                                        seqused_k=torch.tensor(kv_lens, dtype=torch.int32, device=device),
                                        max_seqlen_q=max(query_lens), max_seqlen_k=max(kv_lens), softmax_scale=scale,
                                        causal=True, block_table=table.to(device), q_descale=q_descale.to(device),
                                        k_descale=k_descale, v_descale=v_descale)
        want, _ = cf.paged_attention(q_real, k_real, v_real, query_lens, kv_lens, table, True, scale)
        cf.assert_close(self, got.cpu(), want, "bfloat16", "out")

    @cf.needs_gpu
    def test_fp8_prefills_run_on_the_fp8_tensor_cores(self):
        # FA3 runs FP8 q/k/v on the FP8 tensor cores where it serves (Hopper, D 128 or 256, pages of 128 keys
        # and more): so does the drop-in, within the FP8 error bound of docs/attention.md (relative
        # Frobenius 0.045: Q and P rounded to e4m3 too), a 16-bit cache read as before.
        from pagedattn import _vllm_layers
        if torch.cuda.get_device_capability()[0] != 9:
            self.skipTest("the FP8 tensor-core kernel is Hopper's (sm_90a)")
        fp8 = torch.float8_e4m3fn
        for head_size in (128, 256):
            with self.subTest(head_size=head_size):
                q, k, v, query_lens, kv_lens, table = paged_inputs([(700, 700), (100, 3000), (129, 129)], (8, 2),
                                                                   head_size, 128, 64, torch.float32, seed=5)
                q8, k8, v8 = (x.to(fp8) for x in (q, k, v))
                scale = head_size ** -0.5
                _vllm_layers._impls.clear()
                got = vc.flash_attn_varlen_func(q=q8.cuda(), k=k8.cuda(), v=v8.cuda(),
                                                cu_seqlens_q=cf.offsets(query_lens).cuda(),
                                                seqused_k=torch.tensor(kv_lens, dtype=torch.int32).cuda(),
                                                max_seqlen_q=max(query_lens), max_seqlen_k=max(kv_lens),
                                                softmax_scale=scale, causal=True, block_table=table.cuda())
                generations = {entry[0].kernel_generation() for entry in _vllm_layers._impls.values()}
                self.assertTrue(any("v3" in g for g in generations), generations)
                want, _ = cf.paged_attention(q8.float(), k8.float(), v8.float(), query_lens, kv_lens, table, True,
                                             scale)
                error = float((got.cpu().double() - want).norm() / want.norm())
                self.assertLess(error, 0.045)


@cf.needs_torch
class Cascade(unittest.TestCase):
    """test_cascade: cascade_attention equals flash_attn_varlen_func over the whole sequences."""

    CASES = [([(129, 871), (18, 280), (37, 988), (1023, 2304), (1, 257)], 256),
             ([(1, 1023), (1, 879), (1, 778), (1, 1777)] * 100, 512)]

    def test_grid(self):
        for case in cf.grid("cascade", 0, case=[0, 1], num_heads=[(4, 4), (8, 2), (16, 2)],
                            head_size=[128, 192, 256], dtype=["float16", "bfloat16"], soft_cap=[None, 50.0]):
            with self.subTest(**case):
                self.check(**case)

    def check(self, case, num_heads, head_size, dtype, soft_cap):
        seq_lens, prefix = self.CASES[case]
        q, k, v, query_lens, kv_lens, table = paged_inputs(seq_lens, num_heads, head_size, 16, 2048,
                                                           cf.dtype(dtype), seed=case)
        blocks, gen = prefix // 16, torch.Generator().manual_seed(1)
        shared = table[0, :blocks].clone()
        others = torch.tensor([b for b in range(2048) if b not in set(shared.tolist())])
        for row in table:  # the shared prefix, then blocks of the request's own (each block once per request)
            row[:blocks] = shared
            row[blocks:] = others[torch.randperm(len(others), generator=gen)[:len(row) - blocks]]
        for cache in (k, v):
            cache[table.unique().long()] = torch.randn(len(table.unique()), 16, *k.shape[2:], generator=gen).to(k.dtype)
        scale, cap = head_size ** -0.5, soft_cap if soft_cap is not None else 0
        lens = torch.tensor(kv_lens, dtype=torch.int32)
        cu = cf.offsets(query_lens)
        want = vc.flash_attn_varlen_func(q=q, k=k, v=v, cu_seqlens_q=cu, seqused_k=lens, max_seqlen_q=max(query_lens),
                                         max_seqlen_k=max(kv_lens), softmax_scale=scale, causal=True,
                                         window_size=[-1, -1], block_table=table, softcap=cap)
        out = torch.empty_like(q)
        got = vc.cascade_attention(
            output=out, query=q, key_cache=k, value_cache=v, cu_query_lens=cu, max_query_len=max(query_lens),
            cu_prefix_query_lens=torch.tensor([0, q.shape[0]], dtype=torch.int32),
            prefix_kv_lens=torch.tensor([prefix], dtype=torch.int32), suffix_kv_lens=lens - prefix,
            max_kv_len=max(kv_lens), softmax_scale=scale, alibi_slopes=None, sliding_window=(-1, -1),
            logits_soft_cap=cap, block_table=table, common_prefix_len=prefix, max_num_splits=0, fa_version=None)
        self.assertIs(got, out)
        torch.testing.assert_close(out, want, atol=1e-2, rtol=1e-2)
        first = sum(query_lens[:2])  # the float64 reference on the first two requests
        ref, _ = cf.paged_attention(q[:first], k, v, query_lens[:2], kv_lens[:2], table, True, scale, softcap=cap)
        cf.assert_close(self, out[:first], ref, dtype, "cascade out")

    def test_refusals(self):
        q, k, v, query_lens, kv_lens, table = paged_inputs([(1, 40)], (4, 4), 64, 16, 8, torch.float32, 0)
        common = dict(output=torch.empty_like(q), query=q, key_cache=k, value_cache=v, cu_query_lens=cf.offsets([1]),
                      max_query_len=1, cu_prefix_query_lens=torch.tensor([0, 1], dtype=torch.int32),
                      prefix_kv_lens=torch.tensor([16], dtype=torch.int32),
                      suffix_kv_lens=torch.tensor([24], dtype=torch.int32), max_kv_len=40, softmax_scale=0.1,
                      logits_soft_cap=0, block_table=table, fa_version=None)
        for changes, pattern in [(dict(alibi_slopes=torch.ones(4), sliding_window=(-1, -1), common_prefix_len=16),
                                  "ALiBi"),
                                 (dict(alibi_slopes=None, sliding_window=(7, 0), common_prefix_len=16), "window"),
                                 (dict(alibi_slopes=None, sliding_window=(-1, -1), common_prefix_len=8),
                                  r"common_prefix_len = 8 \(allowed: a positive multiple of block_size 16\)")]:
            with self.subTest(pattern=pattern), self.assertRaisesRegex(ValueError, pattern):
                vc.cascade_attention(**dict(common, **changes))


@cf.needs_torch
class MergeAttnStates(unittest.TestCase):
    """test_merge_kernel, plus empty sides (an LSE of -inf or +inf)."""

    def test_grid(self):
        for case in cf.grid("merge", 0, num_tokens=[1, 39, 16912], num_heads=[(4, 4), (8, 2), (16, 2)],
                            head_size=[128, 192, 256], dtype=["float16", "bfloat16", "float32"]):
            with self.subTest(**case):
                self.check(**case)

    def check(self, num_tokens, num_heads, head_size, dtype):
        gen = torch.Generator().manual_seed(num_tokens)
        h = num_heads[0]
        outs = [torch.randn(num_tokens, h, head_size, generator=gen).to(cf.dtype(dtype)) for _ in range(2)]
        lses = [torch.randn(h, num_tokens, generator=gen) for _ in range(2)]
        lses[1][0, 0] = float("-inf")
        output, output_lse = torch.empty_like(outs[0]), torch.empty(h, num_tokens)
        vc.merge_attn_states(output, outs[0], lses[0], outs[1], lses[1], output_lse)
        top = torch.maximum(*lses)
        p, s = torch.exp(lses[0] - top), torch.exp(lses[1] - top)
        want = (p / (p + s)).t().unsqueeze(2) * outs[0].double() + (s / (p + s)).t().unsqueeze(2) * outs[1].double()
        torch.testing.assert_close(output.double(), want, atol=1e-2, rtol=1e-2)
        torch.testing.assert_close(output_lse, top + torch.log(p + s))


@cf.needs_torch
class ReshapeAndCacheFlash(unittest.TestCase):
    """test_reshape_and_cache_flash: any block size (1 and 8 included), f16/bf16/f32 sources, NHD and
    HND caches, FP8 caches as uint8 (saturate(x / scale), e4m3)."""

    def test_grid(self):
        for case in cf.grid("cache", 0, num_tokens=[42], num_heads=[8], head_size=[64, 80, 256],
                            block_size=[1, 8, 16, 32], num_blocks=[1024], dtype=["float16", "bfloat16", "float32"],
                            kv_cache_dtype=["auto", "fp8"], layout=["NHD", "HND"]):
            with self.subTest(**case):
                self.check(**case)

    def check(self, num_tokens, num_heads, head_size, block_size, num_blocks, dtype, kv_cache_dtype, layout):
        gen = torch.Generator().manual_seed(head_size + block_size)
        slots = torch.randperm(num_blocks * block_size, generator=gen)[:num_tokens]
        slots[3] = -1  # a padding token: not written
        key = torch.randn(num_tokens, num_heads, head_size, generator=gen).to(cf.dtype(dtype))
        value = torch.randn(num_tokens, num_heads, head_size, generator=gen).to(cf.dtype(dtype))
        fp8 = kv_cache_dtype == "fp8"
        cache_dtype = torch.uint8 if fp8 else cf.dtype(dtype)
        shape = (num_blocks, block_size, num_heads, head_size) if layout == "NHD" else (
            num_blocks, num_heads, block_size, head_size)
        caches = [torch.zeros(shape, dtype=cache_dtype) for _ in range(2)]
        if layout == "HND":
            caches = [c.permute(0, 2, 1, 3) for c in caches]
        k_scale, v_scale = (key.abs().amax().float() / 64.0).reshape(1), (value.abs().amax().float() / 64.0).reshape(1)
        vc.reshape_and_cache_flash(key, value, caches[0], caches[1], slots, kv_cache_dtype, k_scale, v_scale)
        real = slots >= 0
        for name, cache, source, scale in (("key", caches[0], key, k_scale), ("value", caches[1], value, v_scale)):
            written = cache[slots[real] // block_size, slots[real] % block_size]
            if fp8:
                decoded = cf.e4m3_to_float(written) * float(scale)
                torch.testing.assert_close(decoded, source[real].double(), atol=float(scale) * 2 ** -6, rtol=2 ** -3)
            else:
                torch.testing.assert_close(written, source[real], atol=0, rtol=0, msg=name)
        written_slots = int((caches[0] != 0).flatten(2).any(2).sum())  # nothing else was written
        self.assertEqual(written_slots, int(real.sum()))

    def test_fp8_needs_scales(self):
        key = torch.randn(2, 1, 64)
        cache = torch.zeros(4, 16, 1, 64, dtype=torch.uint8)
        with self.assertRaisesRegex(ValueError, r"kv_cache_dtype = 'fp8' \(an FP8 cache\) needs k_scale and v_scale"):
            vc.reshape_and_cache_flash(key, key, cache, cache.clone(), torch.tensor([0, 1]), "fp8")

    def test_the_pytorch_copy_matches_the_librarys(self):
        from pagedattn import _cache_write

        gen = torch.Generator().manual_seed(0)
        key, value = torch.randn(5, 2, 64, generator=gen), torch.randn(5, 2, 64, generator=gen)
        slots = torch.tensor([3, -1, 17, 40, 2])
        ours = [torch.zeros(8, 8, 2, 64) for _ in range(2)]
        theirs = [torch.zeros(8, 8, 2, 64, dtype=torch.float16) for _ in range(2)]
        vc.reshape_and_cache_flash(key, value, ours[0], ours[1], slots, "auto")
        _cache_write.torch_scatter(key, value, theirs[0], theirs[1], slots)
        torch.testing.assert_close(theirs[0].float(), ours[0], atol=1e-3, rtol=1e-3)
        torch.testing.assert_close(theirs[1].float(), ours[1], atol=1e-3, rtol=1e-3)


@cf.needs_torch
class SchedulerMetadataAsVllmsBuilderUsesIt(unittest.TestCase):
    """get_scheduler_metadata with vLLM's arguments (no block table) returns an int32 array; vLLM's
    full-graph builder copies it into a persistent buffer (zeroing the rest) and every layer passes
    that buffer. The next step writes new lengths and tables in place and does the same."""

    def test_a_copied_buffer_replays_each_step(self):
        hq, hkv, d, bs, nb = 8, 2, 64, 16, 64
        gen = torch.Generator().manual_seed(0)
        k, v = torch.randn(nb, bs, hkv, d, generator=gen), torch.randn(nb, bs, hkv, d, generator=gen)
        cu, lens = torch.zeros(5, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
        table, q, out = torch.zeros(4, 8, dtype=torch.int32), torch.zeros(4, hq, d), torch.zeros(4, hq, d)
        persistent = torch.zeros(257, dtype=torch.int32)
        for step_lens in ([37, 100, 1, 16], [128, 3, 77, 50]):
            cu.copy_(torch.arange(5, dtype=torch.int32))
            lens.copy_(torch.tensor(step_lens, dtype=torch.int32))
            table.copy_(cf.random_table(4, [8 * bs], bs, nb, gen))
            q.copy_(torch.randn(4, hq, d, generator=gen))
            schedule = vc.get_scheduler_metadata(batch_size=4, max_seqlen_q=1, max_seqlen_k=max(step_lens),
                                                 num_heads_q=hq, num_heads_kv=hkv, headdim=d, cache_seqlens=lens,
                                                 qkv_dtype=torch.float32, cu_seqlens_q=cu, page_size=bs, causal=True,
                                                 window_size=(-1, -1), num_splits=0)
            self.assertEqual((schedule.dtype, schedule.dim()), (torch.int32, 1))
            n = schedule.shape[0]
            persistent[:n] = schedule
            persistent[n:] = 0
            for _ in range(2):  # two layers
                vc.flash_attn_varlen_func(q=q, k=k, v=v, out=out, cu_seqlens_q=cu, max_seqlen_q=1, seqused_k=lens,
                                          max_seqlen_k=max(step_lens), causal=True, block_table=table,
                                          scheduler_metadata=persistent[:n], num_splits=0)
            want, _ = cf.paged_attention(q, k, v, [1] * 4, step_lens, table, True, d ** -0.5)
            cf.assert_close(self, out, want, "float32", "step %s" % step_lens)

    def test_a_buffer_that_is_not_a_schedule_is_refused(self):
        hq, d = 4, 64
        k = torch.randn(4, 16, 4, d)
        with self.assertRaisesRegex(ValueError, "scheduler_metadata does not hold a pagedattn schedule"):
            vc.flash_attn_varlen_func(q=torch.randn(1, hq, d), k=k, v=k, cu_seqlens_q=cf.offsets([1]),
                                      max_seqlen_q=1, seqused_k=torch.tensor([5], dtype=torch.int32), max_seqlen_k=5,
                                      causal=True, block_table=torch.zeros(1, 1, dtype=torch.int32),
                                      scheduler_metadata=torch.zeros(2, dtype=torch.int32))


@cf.needs_torch
class KAndVAtAnyDistance(unittest.TestCase):
    """K and V as two tensors wherever they lie (after, before, far apart): the same result."""

    def test_placements(self):
        hkv, d, bs, nb = 2, 64, 16, 8
        gen = torch.Generator().manual_seed(0)
        k0, v0 = torch.randn(nb, bs, hkv, d, generator=gen), torch.randn(nb, bs, hkv, d, generator=gen)
        q = torch.randn(3, 4, d, generator=gen)
        table = torch.tensor([[3, 1, 6]], dtype=torch.int32)
        want, _ = cf.paged_attention(q, k0, v0, [3], [40], table, True, d ** -0.5)
        size = k0.numel()
        buffer = torch.empty(4 * size + (1 << 22))
        placements = {"V after K": (0, size), "V before K": (size, 0), "far apart": (0, 3 * size + (1 << 22)),
                      "interleaved halves": None}
        for name, offsets in placements.items():
            if offsets is None:
                both = torch.stack([k0, v0], dim=1)
                k, v = both[:, 0], both[:, 1]
            else:
                k = buffer[offsets[0]:offsets[0] + size].view_as(k0).copy_(k0)
                v = buffer[offsets[1]:offsets[1] + size].view_as(v0).copy_(v0)
            with self.subTest(placement=name):
                got = vc.flash_attn_varlen_func(q=q, k=k, v=v, cu_seqlens_q=cf.offsets([3]), max_seqlen_q=3,
                                                seqused_k=torch.tensor([40], dtype=torch.int32), max_seqlen_k=40,
                                                causal=True, block_table=table)
                cf.assert_close(self, got, want, "float32", name)

    @cf.needs_gpu
    def test_placements_on_the_gpu(self):
        # bf16 K and V in one 4 GiB buffer: V after K and V before K by more than 2^31 elements (offsets
        # that wrap in 32 bits), and next to each other; every kernel takes a base pointer per plane.
        hkv, d, bs, nb = 2, 128, 16, 64
        gen = torch.Generator().manual_seed(0)
        k0 = torch.randn(nb, bs, hkv, d, generator=gen).bfloat16()
        v0 = torch.randn(nb, bs, hkv, d, generator=gen).bfloat16()
        q = torch.randn(37, 8, d, generator=gen).bfloat16()
        table = torch.randperm(nb, generator=gen)[:40].int().view(2, 20)
        lens, kv_lens = [1, 36], [300, 317]
        want, _ = cf.paged_attention(q, k0, v0, lens, kv_lens, table, True, d ** -0.5)
        size, far = k0.numel(), (1 << 31) + 4096
        buffer = torch.full((far + 2 * size,), float("nan"), dtype=torch.bfloat16, device="cuda")
        for name, (k_at, v_at) in {"V after K by > 2^31": (0, far + size), "V before K by > 2^31": (far + size, 0),
                                   "adjacent": (0, size)}.items():
            k = buffer[k_at:k_at + size].view_as(k0).copy_(k0)
            v = buffer[v_at:v_at + size].view_as(v0).copy_(v0)
            for q_lens in ([1, 36], [1, 1]):
                rows = q[:sum(q_lens)].cuda()
                expected = want if q_lens == lens else cf.paged_attention(q[:2], k0, v0, q_lens, kv_lens, table,
                                                                           True, d ** -0.5)[0]
                with self.subTest(placement=name, query_lens=q_lens):
                    got = vc.flash_attn_varlen_func(
                        q=rows, k=k, v=v, cu_seqlens_q=cf.offsets(q_lens).cuda(), max_seqlen_q=max(q_lens),
                        seqused_k=torch.tensor(kv_lens, dtype=torch.int32, device="cuda"), max_seqlen_k=max(kv_lens),
                        causal=True, block_table=table.cuda())
                    cf.assert_close(self, got.cpu(), expected, "bfloat16", name)


class FaVersions(unittest.TestCase):
    def test_on_this_machine(self):
        for version in (2, 3, 4):
            supported, reason = vc.is_fa_version_supported(version), vc.fa_version_unsupported_reason(version)
            self.assertEqual(supported, reason is None)
            if not supported:
                self.assertRegex(reason, "FA%d" % version)
        self.assertFalse(vc.is_fa_version_supported(2, device="cpu"))
        self.assertRegex(vc.fa_version_unsupported_reason(3, device="cpu"), "FA3 runs on CUDA GPUs; this device is "
                                                                            "the CPU")
        with self.assertRaisesRegex(ValueError, r"fa_version = 5 \(allowed: 2, 3, 4\)"):
            vc.is_fa_version_supported(5)


if __name__ == "__main__":
    unittest.main()
