"""FlashInfer's ragged and cascade wrappers, its single-request functions and its state merges, on top
of the paged wrapper: contiguous keys [kv_len, Hkv, D] are a paged cache of one-token pages (read in
place by CPU_ATTN, gathered into 16-token blocks for the GPU kernels), and the levels of a cascade are
prefill steps merged by their LSEs."""
import numpy as np

from . import _C
from . import _checks as check
from ._arrays import device_of, empty, framework, on_callers_stream, permuted
from ._fi_paged import LN2, PagedWrapper, host_ints

_FLOAT_NAMES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


def _token_pages(k, layout, name):
    """Contiguous keys (NHD [T, Hkv, D] or HND [Hkv, T, D]) as one-token pages [T, 1, Hkv, D]."""
    check.array(k, name, rank=3, dtypes=check.FLOAT_DTYPES + check.FP8_DTYPES)
    tokens = k if layout == "NHD" else permuted(k, (1, 0, 2))
    return tokens.unsqueeze(1) if framework(tokens) == "torch" else tokens[:, None]


class BatchPrefillWithRaggedKVCacheWrapper:
    """FlashInfer's ragged prefill: each request's keys and values are contiguous rows of k / v."""

    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, qo_indptr_buf=None,
                 kv_indptr_buf=None, custom_mask_buf=None, mask_indptr_buf=None, backend="auto", jit_args=None):
        """use_cuda_graph and custom masks are refused (ragged keys are planned per step on the host)."""
        if use_cuda_graph:
            raise ValueError("use_cuda_graph=True: the ragged wrapper is not capturable here (allowed: False; "
                             "capture the paged wrappers)")
        if custom_mask_buf is not None or mask_indptr_buf is not None or jit_args is not None:
            raise ValueError("custom_mask_buf / mask_indptr_buf / jit_args are not supported (allowed: None)")
        if kv_layout not in ("NHD", "HND"):
            raise ValueError("kv_layout = %r (allowed: 'NHD', 'HND')" % (kv_layout,))
        self._layout = kv_layout  # of k and v; their one-token pages are NHD whichever it is
        self._keys = 0  # kv_indptr[-1] of the plan
        self._paged = _TokenPages(float_workspace_buffer, "NHD", False, {}, backend)

    def plan(self, qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo=None, custom_mask=None,
             packed_custom_mask=None, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
             window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None,
             q_data_type="float16", kv_data_type=None, non_blocking=True):
        """Plans a step whose request r has qo_indptr[r + 1] - qo_indptr[r] queries and the keys
        kv_indptr[r] to kv_indptr[r + 1] (read on the host); RoPE as in the paged plans; non_blocking:
        accepted, no effect."""
        if use_fp16_qk_reduction:
            raise ValueError("use_fp16_qk_reduction = True: scores are reduced in float32 (allowed: False)")
        if custom_mask is not None or packed_custom_mask is not None:
            raise ValueError("custom_mask is not supported (causal or non-causal only)")
        if head_dim_vo not in (None, head_dim_qk):
            raise ValueError("head_dim_vo = %s must equal head_dim_qk = %s" % (head_dim_vo, head_dim_qk))
        queries = check.array(qo_indptr, "qo_indptr", rank=1, dtypes=check.INDEX_DTYPES)
        starts = check.offsets(host_ints(kv_indptr, "kv_indptr"), "kv_indptr", queries.shape[0] - 1)
        lens = np.diff(starts)
        # One-token pages: request r's pages are its key rows kv_indptr[r] .. kv_indptr[r + 1].
        self._paged._plan(qo_indptr, starts, np.arange(int(starts[-1]), dtype=np.int32),
                          np.where(lens > 0, 1, 0).astype(np.int32), num_qo_heads, num_kv_heads, head_dim_qk, 1,
                          causal, pos_encoding_mode, window_left, logits_soft_cap, sm_scale, q_data_type, kv_data_type,
                          rope_theta, rope_scale)
        self._keys = int(starts[-1])

    @on_callers_stream
    def run(self, q, k, v, *, q_scale=None, k_scale=None, v_scale=None, out=None, lse=None, return_lse=False,
            enable_pdl=None, sinks=None, stream=None):
        """Attention of q [total_q, Hq, D] over k / v [total_kv, Hkv, D] (HND: [Hkv, total_kv, D]):
        out, or (out, lse [total_q, Hq] base 2) with return_lse."""
        pages = (_token_pages(k, self._layout, "k"), _token_pages(v, self._layout, "v"))
        check.array(v, "v", shape=k.shape, why="k's shape")
        if pages[0].shape[0] < self._keys:
            raise ValueError("k has %d key rows; kv_indptr[-1] = %d" % (pages[0].shape[0], self._keys))
        return self._paged.run(q, pages, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, out=out, lse=lse,
                               return_lse=return_lse, enable_pdl=enable_pdl, sinks=sinks, stream=stream)

    def run_return_lse(self, q, k, v, **kwargs):
        """FlashInfer's run(..., return_lse=True)."""
        return self.run(q, k, v, return_lse=True, **kwargs)


class _TokenPages(PagedWrapper):
    """A paged wrapper over one-token pages (the ragged and single-request calls)."""

    def __init__(self, float_workspace_buffer, kv_layout, use_cuda_graph, fixed, backend):
        self._setup(float_workspace_buffer, kv_layout, use_cuda_graph, fixed, backend)


class MultiLevelCascadeAttentionWrapper:
    """FlashInfer's cascade: level i's pages are shared by the requests of its qo_indptr; the last level
    holds each request's own pages. Each level runs as a prefill step and the levels merge by LSE."""

    def __init__(self, num_levels, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False,
                 qo_indptr_buf_arr=None, paged_kv_indptr_buf_arr=None, paged_kv_indices_buf_arr=None,
                 paged_kv_last_page_len_buf_arr=None, backend="auto"):
        from .flashinfer_compat import BatchPrefillWithPagedKVCacheWrapper  # here: that module imports this one

        check.integer(num_levels, "num_levels", low=1)
        buffers = (qo_indptr_buf_arr, paged_kv_indptr_buf_arr, paged_kv_indices_buf_arr,
                   paged_kv_last_page_len_buf_arr)
        if use_cuda_graph and any(b is None or len(b) != num_levels for b in buffers):
            raise ValueError("use_cuda_graph=True needs the four *_buf_arr lists with one buffer per level (%d)" %
                             num_levels)
        self._levels = [BatchPrefillWithPagedKVCacheWrapper(
            float_workspace_buffer, kv_layout, use_cuda_graph, *(b[i] if use_cuda_graph else None for b in buffers),
            backend=backend) for i in range(num_levels)]

    def plan(self, qo_indptr_arr, paged_kv_indptr_arr, paged_kv_indices_arr, paged_kv_last_page_len, num_qo_heads,
             num_kv_heads, head_dim, page_size, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
             sm_scale=None, window_left=-1, logits_soft_cap=None, rope_scale=None, rope_theta=None,
             q_data_type="float16", kv_data_type=None):
        """One plan per level (lists with an entry per level); causal applies to the last level, the
        shared ones are read by every query of their requests."""
        for name, values in (("qo_indptr_arr", qo_indptr_arr), ("paged_kv_indptr_arr", paged_kv_indptr_arr),
                             ("paged_kv_indices_arr", paged_kv_indices_arr),
                             ("paged_kv_last_page_len", paged_kv_last_page_len)):
            if not isinstance(values, (list, tuple)) or len(values) != len(self._levels):
                raise ValueError("%s must be a list with one array per level (%d)" % (name, len(self._levels)))
        last = len(self._levels) - 1
        for i, wrapper in enumerate(self._levels):
            wrapper.plan(qo_indptr_arr[i], paged_kv_indptr_arr[i], paged_kv_indices_arr[i], paged_kv_last_page_len[i],
                         num_qo_heads, num_kv_heads, head_dim, page_size, causal=causal and i == last,
                         pos_encoding_mode=pos_encoding_mode, use_fp16_qk_reduction=use_fp16_qk_reduction,
                         sm_scale=sm_scale, window_left=window_left, logits_soft_cap=logits_soft_cap,
                         rope_scale=rope_scale, rope_theta=rope_theta, q_data_type=q_data_type,
                         kv_data_type=kv_data_type)

    @on_callers_stream
    def run(self, q, paged_kv_cache, out=None, lse=None, return_lse=False, sinks=None, stream=None):
        """The cascade's output [total_q, Hq, D] (and its base-2 LSE [total_q, Hq] with return_lse)."""
        if sinks is not None:
            raise ValueError("sinks: a cascade's sinks are not supported (allowed: None)")
        check.array(q, "q", rank=3, dtypes=check.FLOAT_DTYPES)
        if out is not None:
            check.array(out, "out", dtypes=(check.dtype_name(q.dtype),), shape=q.shape, why="q's shape and dtype")
        if lse is not None:
            check.array(lse, "lse", dtypes=("float32",), shape=q.shape[:2], why="[q tokens, num_qo_heads]")
        merged, merged_lse = self._levels[0].run(q, paged_kv_cache, return_lse=True, stream=stream)
        for wrapper in self._levels[1:]:
            level, level_lse = wrapper.run(q, paged_kv_cache, return_lse=True, stream=stream)
            merged, merged_lse = merge_state(merged, merged_lse, level, level_lse)
        if out is not None:
            out[...] = merged
            merged = out
        if lse is not None:
            lse[...] = merged_lse
            merged_lse = lse
        return (merged, merged_lse) if return_lse else merged


def single_decode_with_kv_cache(q, k, v, kv_layout="NHD", pos_encoding_mode="NONE", use_tensor_cores=False,
                                q_scale=None, k_scale=None, v_scale=None, window_left=-1, logits_soft_cap=None,
                                sm_scale=None, rope_scale=None, rope_theta=None, return_lse=False, backend="auto"):
    """FlashInfer's single-request decode: q [Hq, D] over k / v [kv_len, Hkv, D] (HND: [Hkv, kv_len, D]);
    out [Hq, D], or (out, lse [Hq] base 2) with return_lse."""
    check.array(q, "q", rank=2)
    rows = q.unsqueeze(0) if framework(q) == "torch" else q[None]
    result = single_prefill_with_kv_cache(
        rows, k, v, causal=False, kv_layout=kv_layout, pos_encoding_mode=pos_encoding_mode, q_scale=q_scale,
        k_scale=k_scale, v_scale=v_scale, window_left=window_left, logits_soft_cap=logits_soft_cap,
        sm_scale=sm_scale, rope_scale=rope_scale, rope_theta=rope_theta, return_lse=return_lse, backend=backend)
    return (result[0][0], result[1][0]) if return_lse else result[0]


def single_prefill_with_kv_cache(q, k, v, custom_mask=None, packed_custom_mask=None, causal=False, kv_layout="NHD",
                                 pos_encoding_mode="NONE", use_fp16_qk_reduction=False, q_scale=None, k_scale=None,
                                 v_scale=None, window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None,
                                 rope_theta=None, return_lse=False, backend="auto"):
    """FlashInfer's single-request prefill: q [qo_len, Hq, D] over k / v [kv_len, Hkv, D] (causal
    aligned bottom-right); out [qo_len, Hq, D], or (out, lse [qo_len, Hq] base 2) with return_lse."""
    check.array(q, "q", rank=3, dtypes=check.FLOAT_DTYPES)
    check.array(k, "k", rank=3)
    if kv_layout not in ("NHD", "HND"):
        raise ValueError("kv_layout = %r (allowed: 'NHD', 'HND')" % (kv_layout,))
    kv_len = k.shape[0] if kv_layout == "NHD" else k.shape[1]
    wrapper = BatchPrefillWithRaggedKVCacheWrapper(q, kv_layout, backend=backend)
    wrapper.plan(np.array([0, q.shape[0]], np.int32), np.array([0, kv_len], np.int32), q.shape[1],
                 k.shape[1] if kv_layout == "NHD" else k.shape[0], q.shape[2], custom_mask=custom_mask,
                 packed_custom_mask=packed_custom_mask, causal=causal, pos_encoding_mode=pos_encoding_mode,
                 use_fp16_qk_reduction=use_fp16_qk_reduction, window_left=window_left,
                 logits_soft_cap=logits_soft_cap, sm_scale=sm_scale, rope_scale=rope_scale, rope_theta=rope_theta,
                 q_data_type=_FLOAT_NAMES[check.dtype_name(q.dtype)],
                 kv_data_type=check.dtype_name(k.dtype) if check.dtype_name(k.dtype) != "uint8" else None)
    return wrapper.run(q, k, v, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, return_lse=return_lse)


def merge_state(v_a, s_a, v_b, s_b):
    """FlashInfer's merge of two partial results v [T, H, D] with their base-2 LSEs s [T, H] float32:
    (v, s) of the union of their keys (an LSE of -inf is an empty side)."""
    check.array(v_a, "v_a", rank=3, dtypes=check.FLOAT_DTYPES)
    check.array(v_b, "v_b", shape=v_a.shape, dtypes=(check.dtype_name(v_a.dtype),), why="v_a's shape and dtype")
    for name, s in (("s_a", s_a), ("s_b", s_b)):
        check.array(s, name, rank=2, dtypes=("float32",), shape=v_a.shape[:2], why="[T, H] of v_a")
    out = empty(v_a, v_a.shape)
    out_lse = empty(v_a, (v_a.shape[1], v_a.shape[0]), float32=True)
    natural = [_contiguous(permuted(s, (1, 0)) * LN2) for s in (s_a, s_b)]
    _C.merge_attn_states(out, v_a, natural[0], v_b, natural[1], out_lse)
    return out, _contiguous(permuted(out_lse, (1, 0)) * (1.0 / LN2))


def merge_states(v, s):
    """FlashInfer's merge of v [T, num_states, H, D] with base-2 LSEs s [T, num_states, H]: (v, s) merged."""
    check.array(v, "v", rank=4, dtypes=check.FLOAT_DTYPES)
    check.array(s, "s", rank=3, dtypes=("float32",), shape=v.shape[:3], why="[T, num_states, H] of v")
    if v.shape[1] == 0:
        raise ValueError("v has no states (num_states = 0)")
    merged, merged_lse = _contiguous(v[:, 0]), _contiguous(s[:, 0])
    for i in range(1, v.shape[1]):
        merged, merged_lse = merge_state(merged, merged_lse, _contiguous(v[:, i]), _contiguous(s[:, i]))
    return merged, merged_lse


def _contiguous(array):
    if framework(array) == "torch":
        return array.contiguous()
    return np.ascontiguousarray(array) if device_of(array) == "cpu" else array.copy()

