"""A table of bad calls to every drop-in entry point: each is a ValueError whose message names the
argument and what is allowed (never a NumPy broadcast error, IndexError, AttributeError or TypeError
from deeper down, and never a silent run)."""
import unittest


import conformance as cf
from conformance import torch
from pagedattn import flashinfer_compat as fi
from pagedattn import vllm_compat as vc

H, HKV, D, BS, NB = 4, 2, 64, 16, 8


def varlen_args():
    """A valid flash_attn_varlen_func call (two requests: 1 and 3 new tokens over 20 and 30 keys)."""
    gen = torch.Generator().manual_seed(0)
    return dict(q=torch.randn(4, H, D, generator=gen), k=torch.randn(NB, BS, HKV, D, generator=gen),
                v=torch.randn(NB, BS, HKV, D, generator=gen), max_seqlen_q=3, cu_seqlens_q=cf.offsets([1, 3]),
                max_seqlen_k=30, seqused_k=torch.tensor([20, 30], dtype=torch.int32),
                block_table=torch.tensor([[0, 1], [2, 3]], dtype=torch.int32), causal=True)


def schedule_args():
    a = varlen_args()
    return dict(batch_size=2, max_seqlen_q=3, max_seqlen_k=30, num_heads_q=H, num_heads_kv=HKV, headdim=D,
                cache_seqlens=a["seqused_k"], qkv_dtype=torch.float32, cu_seqlens_q=a["cu_seqlens_q"], page_size=BS,
                causal=True)


def cache_args():
    gen = torch.Generator().manual_seed(0)
    return dict(key=torch.randn(3, HKV, D, generator=gen), value=torch.randn(3, HKV, D, generator=gen),
                key_cache=torch.zeros(NB, BS, HKV, D), value_cache=torch.zeros(NB, BS, HKV, D),
                slot_mapping=torch.tensor([0, 5, 17]), kv_cache_dtype="auto")


def merge_args():
    out = torch.zeros(5, H, D)
    return dict(output=out, prefix_output=out.clone(), prefix_lse=torch.zeros(H, 5), suffix_output=out.clone(),
                suffix_lse=torch.zeros(H, 5))


def decode_plan_args():
    return dict(indptr=torch.tensor([0, 2, 4], dtype=torch.int32), indices=torch.arange(4, dtype=torch.int32),
                last_page_len=torch.tensor([4, 14], dtype=torch.int32), num_qo_heads=H, num_kv_heads=HKV,
                head_dim=D, page_size=BS, q_data_type=torch.float32)


def planned_decode():
    wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(torch.zeros(8, dtype=torch.uint8), "NHD")
    wrapper.plan(**decode_plan_args())
    return wrapper


def run_args():
    return dict(q=torch.randn(2, H, D), paged_kv_cache=torch.randn(NB, 2, BS, HKV, D))


def varlen(**changes):
    return lambda: vc.flash_attn_varlen_func(**dict(varlen_args(), **changes))


def schedule(**changes):
    return lambda: vc.get_scheduler_metadata(**dict(schedule_args(), **changes))


def cache(**changes):
    return lambda: vc.reshape_and_cache_flash(**dict(cache_args(), **changes))


def merge(**changes):
    return lambda: vc.merge_attn_states(**dict(merge_args(), **changes))


def decode_plan(**changes):
    wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(torch.zeros(8, dtype=torch.uint8), "NHD")
    return lambda: wrapper.plan(**dict(decode_plan_args(), **changes))


def decode_run(**changes):
    return lambda: planned_decode().run(**dict(run_args(), **changes))


def bad_calls():
    """(what, call, message pattern) for every bad call in the table."""
    a = varlen_args()
    return [
        ("q None", varlen(q=None), r"q is None \(expected an array\)"),
        ("q a list", varlen(q=[[1.0]]), r"q is \[\[1\.0\]\] \(expected an array"),
        ("q rank 2", varlen(q=a["q"][0]), r"q is float32 \[4, 64\] \(expected rank 3\)"),
        ("q int", varlen(q=a["q"].int()), r"q is int32 .*allowed dtypes: float32, float16, bfloat16"),
        ("k rank 5", varlen(k=a["k"][None]), r"k is float32 \[1, 8, 16, 2, 64\] \(expected rank 4\)"),
        ("v another shape", varlen(v=a["v"][:4]), r"v is float32 \[4, 16, 2, 64\] \(expected \[8, 16, 2, 64\]"),
        ("v another dtype", varlen(v=a["v"].half()), r"v is float16 .*allowed dtypes: float32"),
        ("head size", varlen(k=a["k"][..., :32], v=a["v"][..., :32]), r"k has head size 32 but q has 64"),
        ("heads", varlen(q=torch.randn(4, 3, D)), r"q has 3 heads, not a multiple of k's 2 KV heads"),
        ("cu_seqlens_q float", varlen(cu_seqlens_q=a["cu_seqlens_q"].float()), r"cu_seqlens_q is float32 .*int32"),
        ("cu_seqlens_q decreasing", varlen(cu_seqlens_q=torch.tensor([0, 3, 1], dtype=torch.int32)),
         r"cu_seqlens_q is not non-decreasing: cu_seqlens_q\[1\] = 3 > cu_seqlens_q\[2\] = 1"),
        ("cu_seqlens_q not from 0", varlen(cu_seqlens_q=torch.tensor([1, 2, 4], dtype=torch.int32)),
         r"cu_seqlens_q\[0\] = 1 \(expected 0\)"),
        ("cu_seqlens_q past q", varlen(cu_seqlens_q=torch.tensor([0, 1, 9], dtype=torch.int32)),
         r"cu_seqlens_q\[-1\] = 9 but q \(num_tokens\) has 4 rows"),
        ("seqused_k short", varlen(seqused_k=torch.tensor([20], dtype=torch.int32)),
         r"seqused_k is int32 \[1\] \(expected \[2\]: one length per request"),
        ("seqused_k negative", varlen(seqused_k=torch.tensor([20, -1], dtype=torch.int32)),
         r"cache_seqlens\[1\] = -1 \(expected a length >= 0\)"),
        ("more queries than keys", varlen(seqused_k=torch.tensor([20, 2], dtype=torch.int32)),
         r"request 1 has more query tokens than keys"),
        ("keys over max_seqlen_k", varlen(max_seqlen_k=25), r"request 1 has more keys than max_seqlen_k = 25"),
        ("block_table rows", varlen(block_table=a["block_table"][:1]),
         r"block_table has 1 rows \(expected one per request: 2\)"),
        ("block_table rank", varlen(block_table=a["block_table"][0]),
         r"block_table is int32 \[2\] \(expected rank 2\)"),
        ("block_table narrow", varlen(block_table=a["block_table"][:, :1]),
         r"block_table_tensor|block_table"),
        ("window arity", varlen(window_size=(5,)), r"window_size = \(5,\) \(expected \(left, right\)"),
        ("window below -1", varlen(window_size=(-2, 0)), r"window_size = \(-2, 0\) \(expected two ints >= -1"),
        ("negative scale", varlen(softmax_scale=-1.0), r"softmax_scale = -1\.0 \(allowed: None = 1/sqrt"),
        ("negative soft cap", varlen(softcap=-5.0), r"softcap = -5\.0 \(allowed: 0 = no cap, or a positive cap\)"),
        ("nan scale", varlen(softmax_scale=float("nan")), r"softmax_scale = nan"),
        ("out shape", varlen(out=torch.empty(3, H, D)), r"out is float32 \[3, 4, 64\] \(expected \[4, 4, 64\]"),
        ("alibi shape", varlen(alibi_slopes=torch.ones(3)), r"alibi_slopes is float32 \[3\] \(expected \[4\]: one per"),
        ("s_aux shape", varlen(s_aux=torch.ones(2, 4)), r"s_aux is float32 \[2, 4\] \(expected rank 1\)"),
        ("context parallelism", varlen(cp_world_size=2), r"cp_tot_seqused_k is None with cp_world_size = 2 \(required"),
        ("fa_version", varlen(fa_version=7), r"fa_version = 7 \(allowed: None = the backend's choice, 2, 3\)"),
        ("num_splits", varlen(num_splits=-1), r"num_splits = -1 \(allowed: 0"),
        ("batch_size", schedule(batch_size=-1), r"batch_size = -1 \(allowed: at least 0\)"),
        ("batch_size type", schedule(batch_size="2"), r"batch_size = '2' \(expected an int"),
        ("head counts", schedule(num_heads_q=3), r"num_heads_q = 3 is not a multiple of num_heads_kv = 2"),
        ("page_size None", schedule(page_size=None), r"page_size is None \(required"),
        ("page_size 0", schedule(page_size=0), r"page_size = 0 \(allowed: at least 1\)"),
        ("cu_seqlens_q None", schedule(cu_seqlens_q=None), r"cu_seqlens_q is None \(required"),
        ("cu_seqlens_q length", schedule(batch_size=3), r"cu_seqlens_q has shape \[3\] \(expected \[4\]"),
        ("schedule window", schedule(window_size=[1, 2, 3]), r"window_size = \[1, 2, 3\]"),
        ("key None", cache(key=None), r"key is None \(expected an array\)"),
        ("slot_mapping float", cache(slot_mapping=torch.zeros(3)), r"slot_mapping is float32 .*int32, int64"),
        ("slots over tokens", cache(slot_mapping=torch.arange(5)), r"slot_mapping has 5 slots but key has 3 tokens"),
        ("cache heads", cache(key_cache=torch.zeros(NB, BS, 1, D), value_cache=torch.zeros(NB, BS, 1, D)),
         r"key is \[3, 2, 64\] but key_cache holds \[num_kv_heads, head_size\] = \[1, 64\]"),
        ("value cache shape", cache(value_cache=torch.zeros(NB, BS, HKV, 32)), r"value_cache is float32 .*key_cache's"),
        ("fp8 without scales", cache(key_cache=torch.zeros(NB, BS, HKV, D, dtype=torch.uint8),
                                     value_cache=torch.zeros(NB, BS, HKV, D, dtype=torch.uint8), kv_cache_dtype="fp8"),
         r"needs k_scale and v_scale"),
        ("merge lse shape", merge(prefix_lse=torch.zeros(5, H)), r"prefix_lse is float32 \[5, 4\] \(expected \[4, 5\]"),
        ("merge lse dtype", merge(suffix_lse=torch.zeros(H, 5, dtype=torch.float64)), r"suffix_lse is float64"),
        ("merge output None", merge(prefix_output=None), r"prefix_output is None"),
        ("plan indptr decreasing", decode_plan(indptr=torch.tensor([0, 3, 2], dtype=torch.int32)),
         r"indptr is not non-decreasing"),
        ("plan indptr length", decode_plan(indptr=torch.tensor([0, 4], dtype=torch.int32)),
         r"indptr has shape \[2\] \(expected \[3\]"),
        ("plan indices short", decode_plan(indices=torch.arange(3, dtype=torch.int32)),
         r"indices has 3 entries; indptr\[-1\] = 4 pages"),
        ("plan last_page_len", decode_plan(last_page_len=torch.tensor([0, 14], dtype=torch.int32)),
         r"last_page_len\[0\] = 0 \(allowed: 1 to page_size = 16"),
        ("plan page_size", decode_plan(page_size=0), r"page_size = 0 \(allowed: at least 1\)"),
        ("plan window", decode_plan(window_left=-2), r"window_left = -2 \(allowed: -1 = unbounded, or >= 0\)"),
        ("plan sm_scale", decode_plan(sm_scale=-0.5), r"sm_scale = -0\.5 \(allowed: None = 1/sqrt\(head_dim\)"),
        ("plan soft cap", decode_plan(logits_soft_cap=-1.0), r"logits_soft_cap = -1\.0 \(allowed: None or 0"),
        ("plan heads", decode_plan(num_qo_heads=3), r"num_qo_heads = 3 is not a multiple of num_kv_heads = 2"),
        ("plan q dtype", decode_plan(q_data_type="int8"), r"q_data_type = int8 \(allowed: float32, float16"),
        ("plan rope", decode_plan(pos_encoding_mode="ALIBI"), r"pos_encoding_mode = 'ALIBI' \(allowed: 'NONE'"),
        ("run q shape", decode_run(q=torch.randn(3, H, D)), r"q is float32 \[3, 4, 64\] \(expected \[2, 4, 64\]"),
        ("run q dtype", decode_run(q=torch.randn(2, H, D).half()), r"q is float16 .*allowed dtypes: float32"),
        ("run cache rank", decode_run(paged_kv_cache=torch.randn(NB, BS, HKV, D)),
         r"paged_kv_cache is float32 \[8, 16, 2, 64\] \(expected rank 5\)"),
        ("run cache page size", decode_run(paged_kv_cache=torch.randn(NB, 2, 8, HKV, D)),
         r"paged_kv_cache is \[8, 2, 8, 2, 64\] \(expected NHD pages \[\.\., 16, 2, 64\]\)"),
        ("run three halves", decode_run(paged_kv_cache=(torch.randn(NB, BS, HKV, D),) * 3),
         r"paged_kv_cache is a sequence of 3 arrays"),
        ("run window", decode_run(window_left=5), r"window_left = 5 at run\(\); the plan has -1"),
        ("run k_scale", decode_run(k_scale=-1.0), r"k_scale = -1\.0 \(allowed: a positive scale\)"),
        ("run before plan", lambda: fi.BatchPrefillWithPagedKVCacheWrapper(torch.zeros(8)).run(**run_args()),
         r"run\(\) before plan\(\)"),
        ("layout", lambda: fi.BatchDecodeWithPagedKVCacheWrapper(torch.zeros(8), "NDH"), r"kv_layout = 'NDH'"),
        ("workspace None", lambda: fi.BatchDecodeWithPagedKVCacheWrapper(None), r"float_workspace_buffer is None"),
        ("merge_state shapes",
         lambda: fi.merge_state(torch.zeros(3, H, D), torch.zeros(3, H), torch.zeros(3, H, D), torch.zeros(H, 3)),
         r"s_b is float32 \[4, 3\] \(expected \[3, 4\]"),
    ]


@cf.needs_torch
class BadCalls(unittest.TestCase):
    def test_every_bad_call_is_a_value_error_naming_its_argument(self):
        calls = bad_calls()
        self.assertGreater(len(calls), 60)
        for what, call, pattern in calls:
            with self.subTest(what=what), self.assertRaisesRegex(ValueError, pattern):
                call()

    def test_the_valid_calls_run(self):
        vc.flash_attn_varlen_func(**varlen_args())
        vc.reshape_and_cache_flash(**cache_args())
        vc.merge_attn_states(**merge_args())
        planned_decode().run(**run_args())


if __name__ == "__main__":
    unittest.main()
