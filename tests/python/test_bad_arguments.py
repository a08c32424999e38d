"""Bad arguments raise a ValueError that names the argument (and never crash the process): wrong
dtype, device, rank, shape, a non-contiguous head dim, a block table too narrow, non-arrays, bad
names; and the drop-ins refuse what they do not support."""
import unittest

import numpy as np

import fake_dlpack
import pagedattn as pa
from pagedattn import flashinfer_compat as fi
from pagedattn import vllm_compat

H, HKV, D, BS, NB = 4, 2, 64, 16, 6


def step(seq_lens=(20, 9), query_lens=(2, 1), table_width=2):
    """A small valid f32 step on the CPU backend: impl, builder, metadata and arrays."""
    rng = np.random.default_rng(0)
    backend = pa.select_backend(head_size=D, num_heads=H, num_kv_heads=HKV, dtype="f32", block_size=BS,
                                device="cpu").backend
    impl = backend.make_impl(num_heads=H, head_size=D, num_kv_heads=HKV, dtype="f32", device="cpu")
    builder = backend.make_builder(num_heads=H, num_kv_heads=HKV, head_size=D, block_size=BS, dtype="f32",
                                   device="cpu")
    tokens = sum(query_lens)
    wide = np.arange(len(seq_lens) * NB, dtype=np.int32).reshape(len(seq_lens), NB) % NB
    slots = []
    for r, (s, q) in enumerate(zip(seq_lens, query_lens)):
        slots += [int(wide[r, p // BS]) * BS + p % BS for p in range(s - q, s)]
    table = np.ascontiguousarray(wide[:, :table_width])
    arrays = dict(
        query=rng.standard_normal((tokens, H, D), dtype=np.float32),
        key=rng.standard_normal((tokens, HKV, D), dtype=np.float32),
        value=rng.standard_normal((tokens, HKV, D), dtype=np.float32),
        kv_cache=rng.standard_normal((NB, 2, BS, HKV, D), dtype=np.float32),
        output=np.zeros((tokens, H, D), np.float32))
    meta = pa.CommonAttentionMetadata(
        query_start_loc=np.cumsum([0] + list(query_lens)).astype(np.int32),
        seq_lens=np.array(seq_lens, np.int32), block_table_tensor=table, slot_mapping=np.array(slots, np.int64),
        num_reqs=len(seq_lens), num_actual_tokens=tokens, max_query_len=max(query_lens), max_seq_len=max(seq_lens))
    return impl, builder, meta, arrays


class BadArguments(unittest.TestCase):
    def setUp(self):
        self.impl, self.builder, self.meta, self.a = step()
        self.md = self.builder.build(0, self.meta)

    def forward(self, **changes):
        a = dict(self.a, **changes)
        self.impl.forward(a["query"], a["key"], a["value"], a["kv_cache"], self.md, a["output"])

    def assert_value_error(self, pattern, fn, *args, **kwargs):
        with self.assertRaisesRegex(ValueError, pattern):
            fn(*args, **kwargs)

    def test_valid_step_runs(self):
        self.forward()
        self.assertTrue(np.isfinite(self.a["output"]).all())

    def test_wrong_dtype(self):
        self.assert_value_error("query", self.forward, query=self.a["query"].astype(np.float16))
        self.assert_value_error("output", self.forward, output=np.zeros(self.a["output"].shape, np.int32))

    def test_unsupported_dtype_names_the_argument(self):
        self.assert_value_error("query: .*float64.*not supported|query: DLPack dtype", self.forward,
                                query=self.a["query"].astype(np.float64))
        self.assert_value_error("key: DLPack dtype", self.forward, key=self.a["key"].astype(np.int16))

    def test_wrong_device(self):
        on_gpu = fake_dlpack.FakeTensor(self.a["query"], device_type=fake_dlpack.CUDA)
        self.assert_value_error("query.*cuda:0|cuda:0.*query", self.forward, query=on_gpu)
        elsewhere = fake_dlpack.FakeTensor(self.a["query"], device_type=fake_dlpack.VULKAN)
        self.assert_value_error("query: DLPack device type 7", self.forward, query=elsewhere)

    def test_wrong_rank_and_shape(self):
        self.assert_value_error("query", self.forward, query=self.a["query"].reshape(-1, D))
        self.assert_value_error("output", self.forward, output=np.zeros((3, H + 1, D), np.float32))
        self.assert_value_error("kv_cache", self.forward, kv_cache=self.a["kv_cache"][:, :, :, :, : D // 2])

    def test_non_contiguous_head_dim(self):
        wide = np.zeros((3, H, 2 * D), np.float32)
        self.assert_value_error("query.*head_size|head_size.*query", self.forward, query=wide[:, :, ::2])
        cache = np.zeros((NB, 2, BS, HKV, 2 * D), np.float32)[..., ::2]
        self.assert_value_error("kv_cache.*head_size", self.forward, kv_cache=cache)

    def test_block_table_too_narrow(self):
        _, builder, meta, _ = step(seq_lens=(40, 9), query_lens=(1, 1), table_width=2)  # 40 tokens need 3 blocks
        self.assert_value_error("block_table", builder.build, 0, meta)

    def test_not_an_array(self):
        self.assert_value_error("query: expected an array with __dlpack__", self.forward, query=[[1.0]])
        self.assert_value_error("query is required", self.forward, query=None)

    def test_used_capsule(self):
        capsule = self.a["query"].__dlpack__()
        self.forward(query=capsule)
        self.assert_value_error("query: expected a fresh", self.forward, query=capsule)

    def test_bad_names(self):
        self.assert_value_error("dtype", pa.select_backend, head_size=D, num_heads=H, num_kv_heads=HKV, dtype="fp64")
        self.assert_value_error("device", pa.select_backend, head_size=D, num_heads=H, num_kv_heads=HKV, device="tpu")
        self.assert_value_error("layout", pa.get_kv_cache_stride_order, "XYZ")
        self.assert_value_error("sliding_window", pa.find_backend("cpu").make_impl, num_heads=H, head_size=D,
                                num_kv_heads=HKV, sliding_window=(1, 2, 3), device="cpu")

    def test_library_errors_are_value_errors(self):
        self.assert_value_error("num_heads", pa.find_backend("cpu").make_impl, num_heads=3, head_size=D,
                                num_kv_heads=2, dtype="f32", device="cpu")
        self.assert_value_error("FLASH_ATTN", pa.select_backend, head_size=D, num_heads=H, num_kv_heads=HKV,
                                device="cpu", backend="flash_attn")

    def test_two_buffer_cache_at_any_placement(self):
        # K and V as two arrays wherever they lie (V before K, far apart) give the one-tensor result:
        # every backend takes a base pointer per plane.
        a = self.a
        self.forward()
        expected = a["output"].copy()
        cache = a["kv_cache"]
        plane = cache[:, 0].size
        buffer = np.full(2 * plane + 4096 + 64, np.nan, cache.dtype)
        v = buffer[:plane].reshape(cache[:, 1].shape)
        k = buffer[plane + 4096 + 64:].reshape(cache[:, 0].shape)
        k[...], v[...] = cache[:, 0], cache[:, 1]
        a["output"][...] = np.nan
        self.impl.forward_split(a["query"], k, v, self.md, a["output"])
        np.testing.assert_array_equal(a["output"], expected)
        mismatched = np.ascontiguousarray(np.swapaxes(v, 1, 2)).swapaxes(1, 2)  # HND strides
        self.assert_value_error(r"key_cache .* and value_cache .* must have the same strides",
                                self.impl.forward_split, a["query"], k, mismatched,
                                self.md, a["output"])

    def test_per_request_scales(self):
        scales = np.ones((2, HKV), np.float32)
        self.assert_value_error("k_scale.*per request", self.impl.forward, self.a["query"], self.a["key"],
                                self.a["value"], self.a["kv_cache"], self.md, self.a["output"], None, scales)

    def test_drop_in_refusals(self):
        a = self.a
        k, v = a["kv_cache"][:, 0], a["kv_cache"][:, 1]
        qsl, seqs, table = self.meta.query_start_loc, self.meta.seq_lens, self.meta.block_table_tensor
        call = vllm_compat.flash_attn_varlen_func
        self.assert_value_error("block_table", call, a["query"], k, v, 2, qsl, 20, seqused_k=seqs)
        self.assert_value_error("dropout_p", call, a["query"], k, v, 2, qsl, 20, seqused_k=seqs, block_table=table,
                                dropout_p=0.1)
        self.assert_value_error("v is .*k.s shape", call, a["query"], k, v[:, :, :1], 2, qsl, 20, seqused_k=seqs,
                                block_table=table)
        self.assert_value_error("merge|output|prefix", pa.merge_attn_states, a["output"], a["output"],
                                np.zeros((H, 2), np.float32), a["output"], np.zeros((H, 3), np.float32))


class Torch(unittest.TestCase):
    def setUp(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch not importable")
        self.torch = torch

    def test_requires_grad(self):
        impl, builder, meta, a = step()
        md = builder.build(0, meta)
        query = self.torch.from_numpy(a["query"]).requires_grad_()
        with self.assertRaisesRegex(ValueError, "query: the tensor requires grad"):
            impl.forward(query, a["key"], a["value"], a["kv_cache"], md, a["output"])



class FlashInferArguments(unittest.TestCase):
    """flashinfer_compat checks each argument before use: a ValueError naming it, its value and what is allowed."""

    def setUp(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch not importable")
        self.torch = torch
        i32 = dict(dtype=torch.int32)
        self.table = dict(indptr=torch.tensor([0, 2, 3], **i32), indices=torch.tensor([0, 1, 2], **i32),
                          last_page_len=torch.tensor([4, 9], **i32))
        self.cache = torch.randn(3, 2, BS, HKV, D)
        self.q = torch.randn(2, H, D)

    def decode(self, **changes):
        wrapper = cpu_decode_wrapper(self.torch)
        wrapper.plan(*[changes.pop(n, self.table[n]) for n in ("indptr", "indices", "last_page_len")], H, HKV, D,
                     changes.pop("page_size", BS), q_data_type=self.torch.float32, **changes)
        return wrapper

    def prefill(self, **changes):
        wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(self.torch.zeros(16, dtype=self.torch.uint8))
        args = dict(qo_indptr=self.torch.tensor([0, 1, 2], dtype=self.torch.int32),
                    paged_kv_indptr=self.table["indptr"], paged_kv_indices=self.table["indices"],
                    paged_kv_last_page_len=self.table["last_page_len"], num_qo_heads=H, num_kv_heads=HKV,
                    head_dim_qk=D, page_size=BS, q_data_type=self.torch.float32)
        wrapper.plan(**dict(args, **changes))
        return wrapper

    def refused(self, pattern, call, *args, **kwargs):
        with self.assertRaisesRegex(ValueError, pattern):
            call(*args, **kwargs)

    def test_plan_arguments(self):
        self.refused(r"rope_theta = -1\.0 \(allowed: None = 10000, or a positive number\)", self.decode,
                     pos_encoding_mode="ROPE_LLAMA", rope_theta=-1.0)
        self.refused(r"rope_scale = 0 \(allowed: None = 1, or a positive number\)", self.decode, rope_scale=0)
        self.refused(r"pos_encoding_mode = 'ROPE' \(allowed: 'NONE', 'ROPE_LLAMA'", self.decode,
                     pos_encoding_mode="ROPE")
        self.refused(r"pos_encoding_mode = 'ALIBI' \(allowed: 'NONE', 'ROPE_LLAMA'; ALiBi is not supported",
                     self.decode, pos_encoding_mode="ALIBI")
        self.refused(r"indices\[1\] = -3 \(allowed: page ids >= 0\)", self.decode,
                     indices=self.torch.tensor([0, -3, 2], dtype=self.torch.int32))
        self.refused(r"indices is None \(expected an array\)", self.decode, indices=None)
        self.refused(r"paged_kv_indptr is not non-decreasing: paged_kv_indptr\[1\] = 2 > paged_kv_indptr\[2\] = 1",
                     self.prefill, paged_kv_indptr=self.torch.tensor([0, 2, 1], dtype=self.torch.int32))
        self.refused(r"paged_kv_last_page_len\[1\] = 17 \(allowed: 1 to page_size = 16", self.prefill,
                     paged_kv_last_page_len=self.torch.tensor([4, 17], dtype=self.torch.int32))
        self.refused(r"paged_kv_indices has 2 entries; paged_kv_indptr\[-1\] = 3 pages", self.prefill,
                     paged_kv_indices=self.torch.tensor([0, 1], dtype=self.torch.int32))
        self.refused(r"qo_indptr has shape \[2\] \(expected \[3\]", self.prefill,
                     qo_indptr=self.torch.tensor([0, 2], dtype=self.torch.int32))
        self.refused(r"pos_encoding_mode = 'ROPE_LLAMA' needs PyTorch tensors \(got a numpy array",
                     fi.BatchDecodeWithPagedKVCacheWrapper(np.zeros(16, np.uint8)).plan,
                     *[t.numpy() for t in self.table.values()], H, HKV, D, BS, pos_encoding_mode="ROPE_LLAMA")

    def test_run_arguments(self):
        wrapper = self.decode()
        self.refused(r"paged_kv_cache has 2 pages; the plan's page table reads page 2", wrapper.run, self.q,
                     self.cache[:2])
        self.refused(r"paged_kv_cache is \[3, 3, 16, 2, 64\] \(expected \[pages, 2, \.\.\.\]: K and V\)",
                     wrapper.run, self.q, self.torch.randn(3, 3, BS, HKV, D))
        self.refused(r"v_scale = -2\.0 \(allowed: a positive scale\)", wrapper.run, self.q, self.cache, v_scale=-2.0)
        self.refused(r"q_scale = nan \(allowed: a positive scale\)", wrapper.run, self.q, self.cache,
                     q_scale=float("nan"))
        self.refused(r"q is None \(expected an array\)", wrapper.run, None, self.cache)
        fp8 = self.decode(kv_data_type="float8_e4m3fn")
        self.refused(r"k_scale = -1\.0 \(allowed: a positive scale\)", fp8.run, self.q,
                     self.torch.zeros(3, 2, BS, HKV, D, dtype=self.torch.uint8), k_scale=-1.0)

    def test_ragged_and_single_arguments(self):
        torch = self.torch
        ragged = fi.BatchPrefillWithRaggedKVCacheWrapper(torch.zeros(16, dtype=torch.uint8))
        self.refused(r"kv_indptr is not non-decreasing: kv_indptr\[1\] = 9 > kv_indptr\[2\] = 4", ragged.plan,
                     torch.tensor([0, 1, 2], dtype=torch.int32), torch.tensor([0, 9, 4], dtype=torch.int32), H, HKV, D)
        ragged.plan(torch.tensor([0, 1, 2], dtype=torch.int32), torch.tensor([0, 9, 20], dtype=torch.int32), H, HKV,
                    D, q_data_type=torch.float32)
        keys = torch.randn(20, HKV, D)
        self.refused(r"k has 10 key rows; kv_indptr\[-1\] = 20", ragged.run, self.q, keys[:10], keys[:10])
        self.refused(r"v is float32 \[19, 2, 64\] \(expected \[20, 2, 64\]: k's shape\)", ragged.run, self.q, keys,
                     keys[:19])
        self.refused(r"kv_layout = 'NDH' \(allowed: 'NHD', 'HND'\)", fi.single_prefill_with_kv_cache, self.q, keys,
                     keys, kv_layout="NDH")
        self.refused(r"v is None \(expected an array\)", fi.merge_states, None, torch.zeros(2, 1, H))
        cascade = fi.MultiLevelCascadeAttentionWrapper(1, torch.zeros(16, dtype=torch.uint8))
        self.refused(r"lse is float32 \[2, 3\] \(expected \[2, 4\]: \[q tokens, num_qo_heads\]\)", cascade.run,
                     self.q, self.cache, lse=torch.zeros(2, 3))


def cpu_decode_wrapper(torch):
    """A decode wrapper on the CPU (auto binds CPU_ATTN here)."""
    return fi.BatchDecodeWithPagedKVCacheWrapper(torch.zeros(16, dtype=torch.uint8), "NHD")


if __name__ == "__main__":
    unittest.main()
