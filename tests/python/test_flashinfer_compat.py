"""The FlashInfer-style wrappers over the CPU backend (backend="cpu"), on every case dump they can
express (FlashInfer's page table, no ALiBi, windows as window_left): the prefill wrapper (and the
decode wrapper where every request decodes one token) give the C++ run's output bit for bit (within
the dtype's tolerance where the C++ run used cascade) and its LSE in base 2. Their default backend,
"auto", binds the best one here; FLASHINFER named refuses to serve where it cannot, with its reasons."""
import math
import unittest

import numpy as np

import case_dumps
import pagedattn as pa
from pagedattn import flashinfer_compat as fi

try:
    import torch
except ImportError:
    torch = None

TOLERANCE = {"f32": 1e-4, "f16": 5e-3, "bf16": 1.5e-2}


def page_table(dump):
    """FlashInfer's (indptr, indices, last_page_len) for the dump's block table and lengths."""
    bs, table = dump.case["block_size"], dump.load("block_table")
    pages = [math.ceil(s / bs) for s in dump.case["seq_lens"]]
    indptr = np.cumsum([0] + pages).astype(np.int32)
    indices = np.concatenate([table[r, :n] for r, n in enumerate(pages)] + [np.zeros(0, np.int32)]).astype(np.int32)
    last = np.array([s - (n - 1) * bs if n else 0 for s, n in zip(dump.case["seq_lens"], pages)], np.int32)
    return indptr, indices, last


def expressible(dump):
    c = dump.case
    window = c.get("sliding_window") or [-1, -1]
    right = 0 if c.get("causal", True) else -1
    return not c.get("alibi") and (window[0] < 0 and window[1] < 0 or window[1] == right)


def run_wrapper(frame, dump, decode):
    c = dump.case
    # The update is the engine API's (tested elsewhere): take the C++ run's cache as it was after it.
    values = dump.load("kv_cache_raw") if dump.fp8 else dump.load("kv_cache")
    order = list(pa.get_kv_cache_stride_order(dump.meta["kv_layout"]))
    physical = frame.array(values.transpose(order), "u8" if dump.fp8 else c["dtype"])
    indptr, indices, last = (frame.array(x) for x in page_table(dump))
    workspace = frame.full((16,), 0, "u8")
    window = (c.get("sliding_window") or [-1, -1])[0]
    kv_type = c.get("kv_cache_dtype", "auto")
    kv_data_type = {"fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}.get(kv_type)
    q_type = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[c["dtype"]]
    common = dict(window_left=window, logits_soft_cap=c.get("logits_soft_cap"), sm_scale=dump.meta["scale"],
                  q_data_type=q_type, kv_data_type=kv_data_type)
    if decode:
        wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(workspace, dump.meta["kv_layout"], backend="cpu")
        wrapper.plan(indptr, indices, last, c["num_heads"], c["num_kv_heads"], c["head_size"], c["block_size"],
                     **common)
    else:
        wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(workspace, dump.meta["kv_layout"], backend="cpu")
        wrapper.plan(frame.array(dump.load("query_start_loc")), indptr, indices, last, c["num_heads"],
                     c["num_kv_heads"], c["head_size"], c["block_size"], causal=c.get("causal", True), **common)
    sinks, k_scale, v_scale = dump.load("sinks"), dump.load("k_scale"), dump.load("v_scale")
    out, lse = wrapper.run(frame.array(dump.load("query"), c["dtype"]), physical, return_lse=True,
                           sinks=None if sinks is None else frame.array(sinks),
                           k_scale=None if k_scale is None else frame.array(k_scale),
                           v_scale=None if v_scale is None else frame.array(v_scale))
    return frame.to_numpy(out), frame.to_numpy(lse)


class WrappersMatchCpp(unittest.TestCase):
    def test_every_expressible_case(self):
        frames = ["numpy"] + (["torch"] if torch is not None else [])
        ran = 0
        for name, dump in case_dumps.dumps():
            if not expressible(dump):
                continue
            for frame_name in frames:
                if frame_name == "numpy" and dump.case["dtype"] == "bf16":
                    continue
                decodes = [False] + ([True] if set(dump.case["query_lens"]) == {1} else [])
                for decode in decodes:
                    with self.subTest(case=name, frame=frame_name, decode=decode):
                        self.check(dump, *run_wrapper(case_dumps.Frame(frame_name), dump, decode))
                        ran += 1
            print("%-28s FlashInfer-style wrappers match C++" % name)
        self.assertGreater(ran, 0)

    def check(self, dump, out, lse):
        want = dump.load("output")
        if dump.meta["cascade_prefix_len"] == 0:
            np.testing.assert_array_equal(out, want, "out")
        else:
            tol = TOLERANCE[dump.case["dtype"]]
            np.testing.assert_allclose(out, want, atol=tol, rtol=tol, err_msg="out")
        np.testing.assert_allclose(lse * math.log(2.0), dump.load("lse").T, rtol=1e-5, atol=1e-5,
                                   err_msg="lse (base 2, [total_q, Hq])")


class Refusals(unittest.TestCase):
    def test_auto_binds_the_best_backend_here_and_flashinfer_refuses_a_host_workspace(self):
        workspace = np.zeros(16, np.uint8)  # a host workspace: FLASHINFER serves CUDA only
        indptr, indices, last = np.array([0, 1], np.int32), np.array([0], np.int32), np.array([5], np.int32)
        self.assertEqual(fi.BatchDecodeWithPagedKVCacheWrapper(workspace)._backend.name, "CPU_ATTN")
        with self.assertRaisesRegex(ValueError, "FLASHINFER"):
            fi.BatchDecodeWithPagedKVCacheWrapper(workspace, backend="flashinfer").plan(indptr, indices, last, 8, 2,
                                                                                         128, 16)

    def test_unsupported_options(self):
        workspace = np.zeros(16, np.uint8)
        with self.assertRaisesRegex(ValueError, "use_cuda_graph"):
            fi.BatchDecodeWithPagedKVCacheWrapper(workspace, use_cuda_graph=True, backend="cpu")
        wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(workspace, backend="cpu")
        indptr, indices, last = np.array([0, 1], np.int32), np.array([0], np.int32), np.array([5], np.int32)
        with self.assertRaisesRegex(ValueError, "pos_encoding_mode"):
            wrapper.plan(indptr, indices, last, 8, 2, 128, 16, pos_encoding_mode="ROPE_LLAMA")
        with self.assertRaisesRegex(ValueError, "run\\(\\) before plan"):
            wrapper.run(np.zeros((1, 8, 128), np.float32), np.zeros((1, 2, 16, 2, 128), np.float32))


if __name__ == "__main__":
    unittest.main()
