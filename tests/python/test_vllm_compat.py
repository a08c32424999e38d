"""The vLLM drop-ins on the CPU backend, over every case dump: reshape_and_cache_flash writes the
cache the C++ update wrote, and flash_attn_varlen_func (vLLM's call: the cache's K and V halves,
descales broadcast over requests, sinks as s_aux) gives the C++ output and LSE: bit for bit where
the C++ run did not use cascade (flash_attn_varlen_func has no shared-prefix pass), within the
dtype's tolerance where it did. get_scheduler_metadata + scheduler_metadata gives the same bytes."""
import unittest

import numpy as np

import case_dumps
from pagedattn import vllm_compat

try:
    import torch
except ImportError:
    torch = None

TOLERANCE = {"f32": 1e-4, "f16": 5e-3, "bf16": 1.5e-2}  # absolute, on N(0,1) values


def descale(frame, scale, num_reqs):
    """A scale as vLLM passes it: expanded to [num_reqs, Hkv] (stride 0 over requests) in PyTorch."""
    if scale is None:
        return None
    array = frame.array(scale)
    if frame.name != "torch":
        return array
    return array.expand(num_reqs, -1) if array.shape[0] > 1 else array.reshape(1, 1).expand(num_reqs, 1)


def run_drop_ins(frame, dump, use_scheduler_metadata):
    c = dump.case
    fp8 = dump.fp8
    _, cache = case_dumps.paged_cache(frame, dump, "u8" if fp8 else c["dtype"])
    key_cache, value_cache = cache[:, 0], cache[:, 1]
    kv = c.get("kv_cache_dtype", "auto")
    k_scale, v_scale = dump.load("k_scale"), dump.load("v_scale")
    key, value = frame.array(dump.load("key"), c["dtype"]), frame.array(dump.load("value"), c["dtype"])
    slots = frame.array(dump.load("slot_mapping"))
    vllm_compat.reshape_and_cache_flash(key, value, key_cache, value_cache, slots, kv,
                                        None if k_scale is None else frame.array(k_scale),
                                        None if v_scale is None else frame.array(v_scale))
    num_reqs = len(c["seq_lens"])
    qsl, seq_lens = frame.array(dump.load("query_start_loc")), frame.array(dump.load("seq_lens"))
    table = frame.array(dump.load("block_table"))
    window = c.get("sliding_window") or (-1, -1)
    slopes, sinks = dump.load("alibi_slopes"), dump.load("sinks")
    common = dict(softmax_scale=dump.meta["scale"], causal=c.get("causal", True), window_size=list(window),
                  softcap=c.get("logits_soft_cap") or 0.0, block_table=table, kv_cache_dtype=kv)
    scheduler_metadata = None
    if use_scheduler_metadata:
        scheduler_metadata = vllm_compat.get_scheduler_metadata(
            num_reqs, max(c["query_lens"]), max(c["seq_lens"]), c["num_heads"], c["num_kv_heads"], c["head_size"],
            seq_lens, qkv_dtype=c["dtype"], cu_seqlens_q=qsl, page_size=c["block_size"], causal=common["causal"],
            window_size=window, has_softcap=bool(common["softcap"]), block_table=table, kv_cache_dtype=kv,
            has_alibi=slopes is not None, has_sinks=sinks is not None)
    out, lse = vllm_compat.flash_attn_varlen_func(
        frame.array(dump.load("query"), c["dtype"]), key_cache, value_cache, max(c["query_lens"]), qsl,
        max(c["seq_lens"]), seqused_k=seq_lens, alibi_slopes=None if slopes is None else frame.array(slopes),
        return_softmax_lse=True, scheduler_metadata=scheduler_metadata,
        k_descale=descale(frame, k_scale, num_reqs), v_descale=descale(frame, v_scale, num_reqs),
        s_aux=None if sinks is None else frame.array(sinks), **common)
    return frame.to_numpy(cache), frame.to_numpy(out), frame.to_numpy(lse)


class DropInsMatchCpp(unittest.TestCase):
    def test_every_case(self):
        frames = ["numpy"] + (["torch"] if torch is not None else [])
        for name, dump in case_dumps.dumps():
            ran = [f for f in frames if f != "numpy" or dump.case["dtype"] != "bf16"]
            for frame_name in ran:
                frame = case_dumps.Frame(frame_name)
                for planned in (False, True):
                    with self.subTest(case=name, frame=frame_name, scheduler_metadata=planned):
                        self.check(dump, *run_drop_ins(frame, dump, planned))
            print("%-28s drop-ins match C++ (%s)" % (name, ", ".join(ran)))
        if torch is None:
            print("skipped: PyTorch arrays (torch not importable)")

    def check(self, dump, cache, out, lse):
        want_cache = dump.load("kv_cache_raw") if dump.fp8 else dump.load("kv_cache")
        np.testing.assert_array_equal(cache, want_cache, "cache after reshape_and_cache_flash")
        if dump.meta["cascade_prefix_len"] == 0:
            np.testing.assert_array_equal(out, dump.load("output"), "out")
            np.testing.assert_array_equal(lse, dump.load("lse"), "softmax_lse")
        else:
            tol = TOLERANCE[dump.case["dtype"]]
            np.testing.assert_allclose(out, dump.load("output"), atol=tol, rtol=tol, err_msg="out")
            np.testing.assert_allclose(lse, dump.load("lse"), atol=1e-3, rtol=1e-3, err_msg="softmax_lse")


class MergeAttnStates(unittest.TestCase):
    def test_merging_a_result_with_itself(self):
        rng = np.random.default_rng(3)
        out = rng.standard_normal((5, 4, 64), dtype=np.float32)
        lse = rng.standard_normal((4, 5), dtype=np.float32)
        lse[1, 2] = -np.inf  # an empty side keeps the other
        merged, merged_lse = np.full_like(out, np.nan), np.full_like(lse, np.nan)
        empty = np.full_like(lse, -np.inf)
        vllm_compat.merge_attn_states(merged, out, lse, out, empty, merged_lse)
        np.testing.assert_allclose(merged, out, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(merged_lse, lse, rtol=1e-6)
        vllm_compat.merge_attn_states(merged, out, lse, out, lse, merged_lse)
        np.testing.assert_allclose(merged, out, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(merged_lse[lse > -np.inf], (lse + np.log(2.0))[lse > -np.inf], rtol=1e-5)


if __name__ == "__main__":
    unittest.main()
