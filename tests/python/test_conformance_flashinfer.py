"""FlashInfer's wrapper-test contracts through pagedattn.flashinfer_compat, against the float64
reference in conformance.py: the batch decode and paged prefill grids of FlashInfer's
tests/attention/test_batch_decode_kernels.py / test_batch_prefill_kernels.py (page sizes from 1, NHD
and HND, non-contiguous caches, soft caps, return_lse in base 2), CUDA-graph-style fixed buffers
replayed with new plans, the ragged prefill, single_decode / single_prefill, merge_state(s), the
multi-level cascade, FP8 caches named with data_type, and the keywords FlashInfer users pass.
A sample of each grid runs here; PAGEDATTN_FULL_GRID=1 runs all of it (the backend is "auto": CPU_ATTN
on this machine, FLASHINFER on a GPU)."""
import math
import unittest

import conformance as cf
from conformance import torch
from pagedattn import flashinfer_compat as fi

LN2 = math.log(2.0)


def workspace():
    return torch.zeros(16, dtype=torch.uint8)


class PagedStep:
    """FlashInfer's paged inputs: kv_data [pages, 2, page_size, Hkv, D] (HND: [pages, 2, Hkv, page_size, D]),
    optionally a non-contiguous view, pages handed out in random order."""

    def __init__(self, batch_size, kv_len, qo_len, page_size, num_kv_heads, num_qo_heads, head_dim, kv_layout,
                 contiguous_kv, dtype=torch.float16, seed=0):
        gen = torch.Generator().manual_seed(seed)
        self.kv_lens = [kv_len] * batch_size
        self.qo_lens = [qo_len] * batch_size
        pages_per_seq = math.ceil(kv_len / page_size)
        total = pages_per_seq * batch_size
        inner = (page_size, num_kv_heads, head_dim) if kv_layout == "NHD" else (num_kv_heads, page_size, head_dim)
        self.kv = torch.randn(total, 2, *inner, generator=gen).to(dtype)
        if not contiguous_kv:  # FlashInfer's non-contiguous cache: every dim but the head dim strided in a larger
            # buffer, whose other elements are NaN (never read); only the view's are drawn (16x fewer)
            buffer = torch.full((total, 2, 2, 2, inner[0], 2, inner[1], 2, inner[2]), float("nan"), dtype=dtype)
            view = buffer[:, 1, :, 1, :, 1, :, 1, :]
            view.copy_(self.kv)
            self.kv = view
        self.indptr = torch.arange(batch_size + 1, dtype=torch.int32) * pages_per_seq
        self.indices = torch.randperm(total, generator=gen).to(torch.int32)
        self.last_page_len = torch.full((batch_size,), (kv_len - 1) % page_size + 1, dtype=torch.int32)
        self.qo_indptr = cf.offsets(self.qo_lens)
        self.q = torch.randn(sum(self.qo_lens), num_qo_heads, head_dim, generator=gen).to(dtype)
        self.layout, self.page_size = kv_layout, page_size

    def keys_values(self, r):
        pages = self.indices[self.indptr[r]:self.indptr[r + 1]].long()
        kv = self.kv[pages]
        if self.layout == "HND":
            kv = kv.transpose(2, 3)
        k = kv[:, 0].reshape(-1, *kv.shape[3:])[:self.kv_lens[r]]
        v = kv[:, 1].reshape(-1, *kv.shape[3:])[:self.kv_lens[r]]
        return k, v

    def reference(self, causal, soft_cap=0.0, scale=None, rope=None, window=(-1, -1)):
        """(out, lse base 2) in float64; rope = (theta, scale) turns q and k as FlashInfer's ROPE_LLAMA."""
        scale = self.q.shape[2] ** -0.5 if scale is None else scale
        outs, lses, start = [], [], 0
        for r, n in enumerate(self.qo_lens):
            k, v = self.keys_values(r)
            q = self.q[start:start + n]
            if rope is not None:
                q, k = turned(q, k, *rope)
            out, lse = cf.attention(q, k, v, causal, scale, window=window, softcap=soft_cap)
            outs.append(out)
            lses.append(lse)
            start += n
        return torch.cat(outs), torch.cat(lses) / LN2


def turned(q, k, theta, scale):
    """One request's q and k under ROPE_LLAMA: query i at kv_len - qo_len + i, key j at j."""
    kv_len, qo_len = k.shape[0], q.shape[0]
    return (cf.llama_rope(q, torch.arange(qo_len) + kv_len - qo_len, theta, scale),
            cf.llama_rope(k, torch.arange(kv_len), theta, scale))


ROPE = (1e4, 1.0)  # FlashInfer's defaults for rope_theta, rope_scale


def rope_of(case):
    return ROPE if case.get("pos_encoding_mode") == "ROPE_LLAMA" else None


class NeighboursReference:
    """A grid case's float64 reference, shared with the case before where they differ only in axes
    that change how the cache is held or what is returned, not the attention (neighbours in a shard):
    the reference is most of a case's time."""

    SAME = ("return_lse", "contiguous_kv", "use_cuda_graph")

    def __init__(self):
        self.last = None  # (key, reference)

    def __call__(self, case, compute):
        key = tuple(v for n, v in case.items() if n not in self.SAME)
        if self.last is None or self.last[0] != key:
            self.last = key, compute()
        return self.last[1]


def decode_step(case, seed=0):
    return PagedStep(case["batch_size"], case["kv_len"], 1, case["page_size"], case["num_kv_heads"],
                     case["num_qo_heads"], case["head_dim"], case["kv_layout"], case["contiguous_kv"], seed=seed)


def fixed_buffers(step, use_cuda_graph, device):
    """The prefill wrapper's use_cuda_graph keywords, with buffers sized for the step's page table."""
    if not use_cuda_graph:
        return {}
    batch = len(step.qo_lens)
    return dict(use_cuda_graph=True, qo_indptr_buf=torch.zeros(batch + 1, dtype=torch.int32, device=device),
                paged_kv_indptr_buf=torch.zeros(batch + 1, dtype=torch.int32, device=device),
                paged_kv_indices_buf=torch.zeros(step.indices.shape[0], dtype=torch.int32, device=device),
                paged_kv_last_page_len_buf=torch.zeros(batch, dtype=torch.int32, device=device))


def check_result(test, result, want, want_lse, return_lse, dtype_name="float16"):
    out, lse = result if return_lse else (result, None)
    cf.assert_close(test, out, want, dtype_name, "out")
    if return_lse:
        torch.testing.assert_close(lse.double(), want_lse, atol=1e-2, rtol=1e-3)


@cf.needs_torch
class BatchDecode(unittest.TestCase):
    """test_batch_decode_with_paged_kv_cache."""

    def cases(self, page_sizes):
        return cf.grid("decode", 0, batch_size=[12, 17], kv_len=[54, 97, 512], page_size=page_sizes,
                       num_kv_heads=[4], num_qo_heads=[4, 32], head_dim=[128, 256], kv_layout=["NHD", "HND"],
                       logits_soft_cap=[0.0, 30.0], return_lse=[True, False], contiguous_kv=[True, False],
                       pos_encoding_mode=["NONE", "ROPE_LLAMA"])

    def test_grid(self):
        self.run_grid(self.cases([1, 8, 16]), "cpu")

    def test_rope_grid(self):
        self.run_grid([dict(c, pos_encoding_mode="ROPE_LLAMA") for c in self.cases([1, 8, 16])], "cpu")

    @cf.needs_gpu
    def test_grid_on_the_gpu(self):  # pages that are not multiples of 16 are gathered into 16-token blocks
        self.run_grid(self.cases([1, 8, 16, 32]), "cuda")

    def run_grid(self, cases, device):
        reference = NeighboursReference()
        for case in cases:
            with self.subTest(**case):
                step = decode_step(case)
                wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(workspace().to(device), case["kv_layout"])
                wrapper.plan(step.indptr, step.indices, step.last_page_len, case["num_qo_heads"],
                             case["num_kv_heads"], case["head_dim"], case["page_size"],
                             pos_encoding_mode=case["pos_encoding_mode"], logits_soft_cap=case["logits_soft_cap"],
                             q_data_type=torch.float16, kv_data_type=torch.float16)
                result = wrapper.run(step.q.to(device), step.kv.to(device), return_lse=case["return_lse"])
                if case["return_lse"]:
                    result = tuple(x.cpu() for x in result)
                want = reference(case, lambda: step.reference(False, case["logits_soft_cap"], rope=rope_of(case)))
                check_result(self, result if case["return_lse"] else result.cpu(), *want, case["return_lse"])

    def test_rope_constants_layouts_and_halves(self):
        """rope_theta / rope_scale as given, on NHD and HND caches, one tensor or the (K, V) halves."""
        for layout, page_size, halves in (("NHD", 16, False), ("HND", 5, False), ("NHD", 3, True), ("HND", 16, True)):
            with self.subTest(layout=layout, page_size=page_size, halves=halves):
                step = PagedStep(3, 70, 1, page_size, 2, 8, 64, layout, True, seed=page_size)
                wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(workspace(), layout)
                wrapper.plan(step.indptr, step.indices, step.last_page_len, 8, 2, 64, page_size,
                             pos_encoding_mode="ROPE_LLAMA", rope_theta=5e5, rope_scale=2.0)
                cache = (step.kv[:, 0], step.kv[:, 1]) if halves else step.kv
                out, lse = wrapper.run(step.q, cache, return_lse=True)
                check_result(self, (out, lse), *step.reference(False, rope=(5e5, 2.0)), True)

    def test_use_tensor_cores_and_the_cache_halves(self):
        step = PagedStep(3, 40, 1, 8, 2, 8, 64, "NHD", True)
        want, _ = step.reference(False)
        for use_tensor_cores in (False, True):
            wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD", use_tensor_cores=use_tensor_cores)
            self.assertEqual(wrapper.use_tensor_cores, use_tensor_cores)
            wrapper.plan(step.indptr, step.indices, step.last_page_len, 8, 2, 64, 8)
            cf.assert_close(self, wrapper.run(step.q, (step.kv[:, 0], step.kv[:, 1])), want, "float16", "halves")

    def test_scales_on_a_16_bit_cache(self):
        step = PagedStep(3, 40, 1, 8, 2, 8, 64, "NHD", True)
        wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
        wrapper.plan(step.indptr, step.indices, step.last_page_len, 8, 2, 64, 8, sm_scale=0.1)
        want, _ = step.reference(False, scale=0.1 * 0.5 * 2.0)
        got = wrapper.run(step.q, step.kv, q_scale=0.5, k_scale=2.0, v_scale=3.0)
        cf.assert_close(self, got, 3.0 * want, "float16", "q_scale, k_scale fold into sm_scale; v_scale scales out")

    def test_an_fp8_cache_named_with_data_type(self):
        step = PagedStep(2, 30, 1, 16, 2, 4, 64, "NHD", True)
        gen = torch.Generator().manual_seed(5)
        codes = torch.randint(0, 0x7E, step.kv.shape, generator=gen, dtype=torch.uint8)
        codes |= torch.randint(0, 2, step.kv.shape, generator=gen, dtype=torch.uint8) << 7
        step.kv = cf.e4m3_to_float(codes).to(torch.float16)  # what the reference reads (scale 1.0)
        wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
        wrapper.plan(step.indptr, step.indices, step.last_page_len, 4, 2, 64, 16, data_type="float8_e4m3fn",
                     q_data_type="float16")
        want, _ = step.reference(False)
        cf.assert_close(self, wrapper.run(step.q, codes), want, "float16", "FP8 cache, scale None = 1.0")

    @unittest.skipUnless(cf.torch is not None and hasattr(cf.torch, "float8_e4m3fn"),
                         "this PyTorch has no float8_e4m3fn (FlashInfer's FP8 cache dtype)")
    def test_a_float8_cache_named_with_data_type_at_small_pages(self):
        for page_size in (1, 8, 16):
            with self.subTest(page_size=page_size):
                step = PagedStep(3, 54, 1, page_size, 4, 32, 128, "NHD", True, seed=page_size)
                fp8 = step.kv.to(torch.float8_e4m3fn)
                step.kv = fp8.to(torch.float16)  # what the reference reads (scale 1.0)
                wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
                wrapper.plan(step.indptr, step.indices, step.last_page_len, 32, 4, 128, page_size,
                             data_type=torch.float8_e4m3fn)
                out, lse = wrapper.run(step.q, fp8, return_lse=True)
                check_result(self, (out, lse), *step.reference(False), True)

    def test_rope_on_an_fp8_cache_is_refused_with_the_reason(self):
        step = PagedStep(2, 30, 1, 16, 2, 4, 64, "NHD", True)
        wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
        with self.assertRaisesRegex(ValueError, r"pos_encoding_mode = 'ROPE_LLAMA' with an FP8 cache \(fp8_e4m3\)"):
            wrapper.plan(step.indptr, step.indices, step.last_page_len, 4, 2, 64, 16, data_type="float8_e4m3fn",
                         pos_encoding_mode="ROPE_LLAMA")


@cf.needs_torch
class BatchPrefillPaged(unittest.TestCase):
    """test_batch_prefill_with_paged_kv_cache."""

    def test_grid(self):
        self.run_grid(self.cases(), "cpu")

    def test_rope_grid(self):
        self.run_grid([dict(c, pos_encoding_mode="ROPE_LLAMA") for c in self.cases()], "cpu")

    @cf.needs_gpu
    def test_grid_on_the_gpu(self):
        self.run_grid(self.cases(), "cuda")

    def cases(self):
        return cf.grid("prefill", 0, batch_size=[12, 17], kv_len=[54, 97], qo_len=[37, 17], page_size=[1, 5, 16],
                       num_kv_heads=[4], num_qo_heads=[4, 32], head_dim=[64, 128, 256], causal=[False, True],
                       kv_layout=["NHD", "HND"], logits_soft_cap=[0.0, 30.0], return_lse=[True, False],
                       contiguous_kv=[True, False], pos_encoding_mode=["NONE", "ROPE_LLAMA"],
                       use_cuda_graph=[False, True])

    def run_grid(self, cases, device):
        reference = NeighboursReference()
        for case in cases:
            with self.subTest(**case):
                step = PagedStep(case["batch_size"], case["kv_len"], case["qo_len"], case["page_size"],
                                 case["num_kv_heads"], case["num_qo_heads"], case["head_dim"], case["kv_layout"],
                                 case["contiguous_kv"])
                wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(workspace().to(device), case["kv_layout"],
                                                                 **fixed_buffers(step, case["use_cuda_graph"], device))
                wrapper.plan(step.qo_indptr, step.indptr, step.indices, step.last_page_len, case["num_qo_heads"],
                             case["num_kv_heads"], case["head_dim"], case["page_size"], causal=case["causal"],
                             pos_encoding_mode=case["pos_encoding_mode"], logits_soft_cap=case["logits_soft_cap"],
                             q_data_type=torch.float16)
                result = wrapper.run(step.q.to(device), step.kv.to(device), return_lse=case["return_lse"])
                result = tuple(x.cpu() for x in result) if case["return_lse"] else result.cpu()
                want = reference(case, lambda: step.reference(case["causal"], case["logits_soft_cap"],
                                                               rope=rope_of(case)))
                check_result(self, result, *want, case["return_lse"])

    def test_page_sizes_from_1_to_1024(self):
        """FlashInfer takes any page size: each one here, over keys spanning several pages."""
        self.run_page_sizes("cpu")

    @cf.needs_gpu
    def test_page_sizes_from_1_to_1024_on_the_gpu(self):
        self.run_page_sizes("cuda")

    def run_page_sizes(self, device):
        for page_size in (1, 2, 3, 7, 16, 33, 128, 1024):
            for causal, rope in ((True, None), (False, ROPE)):
                with self.subTest(page_size=page_size, causal=causal, rope=rope):
                    kv_len = 2 * page_size + 5 if page_size < 1024 else 1500
                    step = PagedStep(3, kv_len, 6, page_size, 2, 8, 64, "NHD", True, seed=page_size)
                    wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(workspace().to(device), "NHD")
                    wrapper.plan(step.qo_indptr, step.indptr, step.indices, step.last_page_len, 8, 2, 64, page_size,
                                 causal=causal, pos_encoding_mode="ROPE_LLAMA" if rope else "NONE")
                    out, lse = wrapper.run(step.q.to(device), step.kv.to(device), return_lse=True)
                    check_result(self, (out.cpu(), lse.cpu()), *step.reference(causal, rope=rope), True)

    def test_out_and_lse_buffers(self):
        step = PagedStep(2, 40, 9, 16, 2, 4, 64, "NHD", True)
        wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(workspace(), "NHD")
        wrapper.plan(step.qo_indptr, step.indptr, step.indices, step.last_page_len, 4, 2, 64, 16, causal=True)
        out, lse = torch.empty_like(step.q), torch.empty(step.q.shape[:2])
        got = wrapper.run_return_lse(step.q, step.kv, out=out, lse=lse)
        self.assertIs(got[0], out)
        self.assertIs(got[1], lse)
        check_result(self, got, *step.reference(True), True)


class MultiplesOf16:
    """The bound backend as the GPU kernels take pages (multiples of 16 only), so that the drop-in's
    gather into 16-token blocks runs here on CPU_ATTN as it runs on a GPU."""

    def __init__(self, backend):
        self._backend = backend

    def supports_block_size(self, size):
        return size % 16 == 0

    def __getattr__(self, name):
        return getattr(self._backend, name)


@cf.needs_torch
class GatheredPages(unittest.TestCase):
    """Page sizes the kernels do not take: each request's keys gathered into 16-token blocks."""

    def test_page_sizes_the_kernels_do_not_take(self):
        for page_size, layout, halves, qo_len in ((1, "NHD", False, 1), (5, "HND", False, 7), (8, "NHD", True, 1),
                                                  (24, "HND", True, 9)):
            with self.subTest(page_size=page_size, layout=layout, halves=halves, qo_len=qo_len):
                step = PagedStep(4, 61, qo_len, page_size, 2, 8, 64, layout, False, seed=page_size)
                wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(workspace(), layout)
                wrapper._backend = MultiplesOf16(wrapper._backend)
                wrapper.plan(step.qo_indptr, step.indptr, step.indices, step.last_page_len, 8, 2, 64, page_size,
                             causal=True, window_left=20)
                self.assertTrue(wrapper._step["gathered"])
                cache = (step.kv[:, 0], step.kv[:, 1]) if halves else step.kv
                out, lse = wrapper.run(step.q, cache, return_lse=True)
                want, want_lse = step.reference(True, window=(20, 0))
                check_result(self, (out, lse), want, want_lse, True)

    def test_an_fp8_cache_gathered_with_its_scales(self):
        step = PagedStep(3, 45, 1, 8, 2, 4, 64, "NHD", True)
        gen = torch.Generator().manual_seed(9)
        codes = torch.randint(0, 0x7E, step.kv.shape, generator=gen, dtype=torch.uint8)
        step.kv = cf.e4m3_to_float(codes).to(torch.float16)
        wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
        wrapper._backend = MultiplesOf16(wrapper._backend)
        wrapper.plan(step.indptr, step.indices, step.last_page_len, 4, 2, 64, 8, kv_data_type="float8_e4m3fn")
        out = wrapper.run(step.q, codes, k_scale=0.5, v_scale=2.0)
        step.kv = step.kv.double() * torch.tensor([0.5, 2.0], dtype=torch.float64).view(1, 2, 1, 1, 1)
        cf.assert_close(self, out, step.reference(False)[0], "float16", "FP8 pages of 8, gathered")


@cf.needs_torch
class CudaGraphBuffers(unittest.TestCase):
    """use_cuda_graph=True with FlashInfer's fixed buffers: each plan writes them and the step's arrays
    in place, and the same run replays the newest plan (the graph's view of it)."""

    def test_plans_replay_in_the_same_buffers(self):
        batch, hq, hkv, d, ps = 4, 8, 2, 64, 16
        buffers = dict(paged_kv_indptr_buffer=torch.zeros(batch + 1, dtype=torch.int32),
                       paged_kv_indices_buffer=torch.zeros(64, dtype=torch.int32),
                       paged_kv_last_page_len_buffer=torch.zeros(batch, dtype=torch.int32))
        wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD", use_cuda_graph=True, **buffers)
        self.assertTrue(wrapper.is_cuda_graph_enabled)
        out = torch.empty(batch, hq, d, dtype=torch.float16)
        for seed, kv_len in enumerate((40, 97, 16)):
            step = PagedStep(batch, kv_len, 1, ps, hkv, hq, d, "NHD", True, seed=seed)
            wrapper.plan(step.indptr, step.indices, step.last_page_len, hq, hkv, d, ps)
            self.assertTrue(torch.equal(buffers["paged_kv_indptr_buffer"], step.indptr))
            wrapper.run(step.q, step.kv, out=out)
            cf.assert_close(self, out, step.reference(False)[0], "float16", "kv_len %d" % kv_len)
        with self.assertRaisesRegex(ValueError, r"the plan has 3 requests; under use_cuda_graph the batch is fixed "
                                                r"at 4"):
            step = PagedStep(3, 20, 1, ps, hkv, hq, d, "NHD", True)
            wrapper.plan(step.indptr, step.indices, step.last_page_len, hq, hkv, d, ps)

    def test_gathered_pages_and_rope_replay_in_the_same_buffers(self):
        """Page size 8 with RoPE (keys gathered into 16-token blocks): each plan rewrites the gather maps
        and the positions in place, so one run per plan in the same arrays gives each plan's result."""
        self.replay(torch.device("cpu"), lambda run: run())

    @cf.needs_gpu
    def test_a_captured_graph_replays_new_plans(self):
        def captured(run):
            graph = torch.cuda.CUDAGraph()
            run()  # warm-up outside the capture (allocations, kernel selection)
            with torch.cuda.graph(graph):
                run()
            return graph
        self.replay(torch.device("cuda"), captured)

    def replay(self, device, first_call):
        """Plans of several lengths through one wrapper and one `out`; first_call(run) makes the first
        run (a graph under capture on the GPU, which each later plan replays)."""
        batch, hq, hkv, d, ps = 4, 8, 2, 64, 8
        buffers = dict(paged_kv_indptr_buffer=torch.zeros(batch + 1, dtype=torch.int32, device=device),
                       paged_kv_indices_buffer=torch.zeros(64, dtype=torch.int32, device=device),
                       paged_kv_last_page_len_buffer=torch.zeros(batch, dtype=torch.int32, device=device))
        wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(workspace().to(device), "NHD", use_cuda_graph=True, **buffers)
        q = torch.empty(batch, hq, d, dtype=torch.float16, device=device)
        kv = torch.empty(64, 2, ps, hkv, d, dtype=torch.float16, device=device)
        out = torch.empty(batch, hq, d, dtype=torch.float16, device=device)
        graph = None
        for seed, kv_len in enumerate((100, 40, 97, 16)):
            step = PagedStep(batch, kv_len, 1, ps, hkv, hq, d, "NHD", True, seed=seed)
            q.copy_(step.q)
            kv[:step.kv.shape[0]].copy_(step.kv)
            wrapper.plan(step.indptr, step.indices, step.last_page_len, hq, hkv, d, ps, pos_encoding_mode="ROPE_LLAMA")
            if graph is None:
                graph = first_call(lambda: wrapper.run(q, kv, out=out))
            elif hasattr(graph, "replay"):
                graph.replay()
            else:
                wrapper.run(q, kv, out=out)
            cf.assert_close(self, out.cpu(), step.reference(False, rope=ROPE)[0], "float16", "kv_len %d" % kv_len)

    def test_missing_buffers_are_named(self):
        with self.assertRaisesRegex(ValueError, "paged_kv_indptr_buffer is None: use_cuda_graph=True needs"):
            fi.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD", use_cuda_graph=True)


@cf.needs_torch
class RaggedAndSingle(unittest.TestCase):
    """test_batch_prefill_with_ragged_kv_cache, test_single_decode / test_single_prefill."""

    def test_ragged_grid(self):
        for case in cf.grid("ragged", 0, batch_size=[12, 17], kv_len=[54, 97], qo_len=[37, 17], num_kv_heads=[4],
                            num_qo_heads=[4, 32], head_dim=[128, 256], causal=[False, True],
                            logits_soft_cap=[0.0, 30.0], pos_encoding_mode=["NONE", "ROPE_LLAMA"]):
            with self.subTest(**case):
                gen = torch.Generator().manual_seed(case["kv_len"])
                b, hq, hkv, d = case["batch_size"], case["num_qo_heads"], case["num_kv_heads"], case["head_dim"]
                q = torch.randn(b * case["qo_len"], hq, d, generator=gen).half()
                k = torch.randn(b * case["kv_len"], hkv, d, generator=gen).half()
                v = torch.randn(b * case["kv_len"], hkv, d, generator=gen).half()
                wrapper = fi.BatchPrefillWithRaggedKVCacheWrapper(workspace(), "NHD")
                wrapper.plan(cf.offsets([case["qo_len"]] * b), cf.offsets([case["kv_len"]] * b), hq, hkv, d,
                             causal=case["causal"], logits_soft_cap=case["logits_soft_cap"],
                             pos_encoding_mode=case["pos_encoding_mode"])
                out = wrapper.run(q, k, v)
                ql, kl = case["qo_len"], case["kv_len"]
                for r in (0, b - 1):
                    qr, kr = q[r * ql:(r + 1) * ql], k[r * kl:(r + 1) * kl]
                    if rope_of(case):
                        qr, kr = turned(qr, kr, *ROPE)
                    want, _ = cf.attention(qr, kr, v[r * kl:(r + 1) * kl], case["causal"], d ** -0.5,
                                           softcap=case["logits_soft_cap"])
                    cf.assert_close(self, out[r * ql:(r + 1) * ql], want, "float16", "request %d" % r)

    def test_single_grid(self):
        for case in cf.grid("single", 0, kv_len=[1, 17, 512], qo_len=[1, 37], num_heads=[(4, 4), (32, 4)],
                            head_dim=[64, 128], causal=[False, True], kv_layout=["NHD", "HND"]):
            if case["causal"] and case["qo_len"] > case["kv_len"]:
                continue
            with self.subTest(**case):
                gen = torch.Generator().manual_seed(case["kv_len"])
                (hq, hkv), d = case["num_heads"], case["head_dim"]
                q = torch.randn(case["qo_len"], hq, d, generator=gen).half()
                k = torch.randn(case["kv_len"], hkv, d, generator=gen).half()
                v = torch.randn(case["kv_len"], hkv, d, generator=gen).half()
                stored = (k, v) if case["kv_layout"] == "NHD" else (k.transpose(0, 1).contiguous(),
                                                                     v.transpose(0, 1).contiguous())
                want, want_lse = cf.attention(q, k, v, case["causal"], d ** -0.5)
                out, lse = fi.single_prefill_with_kv_cache(q, *stored, causal=case["causal"],
                                                           kv_layout=case["kv_layout"], return_lse=True)
                cf.assert_close(self, out, want, "float16", "prefill")
                torch.testing.assert_close(lse.double(), want_lse / LN2, atol=1e-2, rtol=1e-3)
                decoded = fi.single_decode_with_kv_cache(q[-1], *stored, kv_layout=case["kv_layout"])
                cf.assert_close(self, decoded, cf.attention(q[-1:], k, v, False, d ** -0.5)[0][0], "float16",
                                "decode")

    def test_single_with_rope(self):
        gen = torch.Generator().manual_seed(3)
        q = torch.randn(9, 8, 64, generator=gen).half()
        k = torch.randn(40, 2, 64, generator=gen).half()
        v = torch.randn(40, 2, 64, generator=gen).half()
        rope = dict(pos_encoding_mode="ROPE_LLAMA", rope_theta=5e5, rope_scale=4.0)
        out = fi.single_prefill_with_kv_cache(q, k, v, causal=True, **rope)
        cf.assert_close(self, out, cf.attention(*turned(q, k, 5e5, 4.0), v, True, 64 ** -0.5)[0], "float16", "prefill")
        decoded = fi.single_decode_with_kv_cache(q[-1], k, v, **rope)
        want = cf.attention(*turned(q[-1:], k, 5e5, 4.0), v, False, 64 ** -0.5)[0][0]
        cf.assert_close(self, decoded, want, "float16", "decode")


@cf.needs_torch
class MergeStates(unittest.TestCase):
    """test_merge_state / test_merge_states: base-2 LSEs [T, H]."""

    def test_grid(self):
        for case in cf.grid("merge_states", 0, seq_len=[1, 7, 137], num_heads=[4, 32], head_dim=[128],
                            num_states=[2, 3, 128]):
            with self.subTest(**case):
                gen = torch.Generator().manual_seed(case["num_states"])
                t, h, d, n = case["seq_len"], case["num_heads"], case["head_dim"], case["num_states"]
                v = torch.randn(t, n, h, d, generator=gen).half()
                s = torch.randn(t, n, h, generator=gen)
                weights = torch.softmax(s.double() * LN2, dim=1)
                want = (weights.unsqueeze(3) * v.double()).sum(1)
                want_lse = torch.logsumexp(s.double() * LN2, dim=1) / LN2
                merged, merged_lse = fi.merge_states(v, s)
                cf.assert_close(self, merged, want, "float16", "merge_states")
                torch.testing.assert_close(merged_lse.double(), want_lse, atol=1e-4, rtol=1e-4)
                pair, pair_lse = fi.merge_state(v[:, 0], s[:, 0], v[:, 1], s[:, 1])
                w2 = torch.softmax(s[:, :2].double() * LN2, dim=1)
                cf.assert_close(self, pair, (w2.unsqueeze(3) * v[:, :2].double()).sum(1), "float16", "merge_state")


@cf.needs_torch
class MultiLevelCascade(unittest.TestCase):
    """test_multi_level_cascade: a shared prefix level then each request's own pages equals plain
    attention over the whole sequences."""

    def test_two_levels(self):
        batch, hq, hkv, d, ps, shared_pages = 5, 8, 2, 64, 16, 3
        step = PagedStep(batch, 70, 9, ps, hkv, hq, d, "NHD", True)
        own_pages = step.indptr[1] - shared_pages  # the first pages of every request become the shared level
        shared = step.indices[:shared_pages]
        own = torch.cat([step.indices[step.indptr[r] + shared_pages:step.indptr[r + 1]] for r in range(batch)])
        full = torch.cat([torch.cat([shared, own[r * own_pages:(r + 1) * own_pages]]) for r in range(batch)])
        step.indices = full
        wrapper = fi.MultiLevelCascadeAttentionWrapper(2, workspace(), "NHD")
        wrapper.plan([torch.tensor([0, step.q.shape[0]], dtype=torch.int32), step.qo_indptr],
                     [torch.tensor([0, shared_pages], dtype=torch.int32),
                      torch.arange(batch + 1, dtype=torch.int32) * own_pages],
                     [shared.int(), own.int()], [torch.tensor([ps], dtype=torch.int32), step.last_page_len],
                     hq, hkv, d, ps, causal=True)
        out = wrapper.run(step.q, step.kv)
        cf.assert_close(self, out, step.reference(True)[0], "float16", "cascade")


class Binding(unittest.TestCase):
    """FlashInfer's backend keyword: auto binds the best backend here; its own other kernels are refused."""

    def test_backends(self):
        if cf.torch is None:
            self.skipTest("PyTorch is not importable")
        on_cpu = fi.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD", backend="auto")
        self.assertEqual(on_cpu._backend.name, "CPU_ATTN")
        with self.assertRaisesRegex(ValueError, r"backend = 'trtllm-gen' is unknown \(allowed: 'auto', 'fa2', 'fa3'"):
            fi.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD", backend="trtllm-gen")
        # Unavailable in a CPU-only build; built with CUDA, it still does not run where the workspace is.
        with self.assertRaisesRegex(ValueError, r"backend 'fa2' \(FLASHINFER\)(: | does not run on cpu)"):
            fi.BatchPrefillWithPagedKVCacheWrapper(workspace(), "NHD", backend="fa2")


if __name__ == "__main__":
    unittest.main()
