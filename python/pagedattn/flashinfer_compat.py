"""Drop-ins with FlashInfer's names and signatures (0.2+): BatchDecodeWithPagedKVCacheWrapper,
BatchPrefillWithPagedKVCacheWrapper, BatchPrefillWithRaggedKVCacheWrapper,
MultiLevelCascadeAttentionWrapper, single_decode_with_kv_cache, single_prefill_with_kv_cache,
merge_state and merge_states.

FlashInfer's page table (``indptr``, ``indices``, ``last_page_len``), cache (``[num_pages, 2,
page_size, Hkv, D]`` NHD or ``[num_pages, 2, Hkv, page_size, D]`` HND, or the (K, V) halves) and LSE
(``[total_q, Hq]``, base 2). ``backend="auto"`` (FlashInfer's default) binds the FLASHINFER backend
where it serves the workspace's device, else the device's best (CPU_ATTN on the CPU); "fa2" / "fa3"
force FLASHINFER's kernel generation; our backends' names ("flashinfer", "flash_attn", "cpu") pick
one. ``plan()`` reads the page table on the host and builds the step (once per step, for every
layer); ``run()`` only converts the arrays and queues the kernel on the caller's stream (first gathering
pages the kernels cannot take into 16-token blocks, and turning q and k under ROPE_LLAMA). What is not
supported is a ValueError that names it; docs/python.md lists every keyword.
"""
import numpy as np

from . import _checks as check
from ._fi_functions import (BatchPrefillWithRaggedKVCacheWrapper, MultiLevelCascadeAttentionWrapper, merge_state,
                            merge_states, single_decode_with_kv_cache, single_prefill_with_kv_cache)
from ._fi_paged import PagedWrapper

__all__ = ["BatchDecodeWithPagedKVCacheWrapper", "BatchPrefillWithPagedKVCacheWrapper",
           "BatchPrefillWithRaggedKVCacheWrapper", "MultiLevelCascadeAttentionWrapper", "single_decode_with_kv_cache",
           "single_prefill_with_kv_cache", "merge_state", "merge_states"]


class BatchDecodeWithPagedKVCacheWrapper(PagedWrapper):
    """FlashInfer's decode wrapper: one query token per request."""

    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, use_tensor_cores=False,
                 paged_kv_indptr_buffer=None, paged_kv_indices_buffer=None, paged_kv_last_page_len_buffer=None,
                 backend="auto", jit_args=None):
        """use_tensor_cores picks FlashInfer's kernel (the prefill one for decodes); the result is the
        same: accepted, no effect. jit_args (FlashInfer's own JIT modules) are refused."""
        if jit_args is not None:
            raise ValueError("jit_args: FlashInfer's JIT modules are not supported (allowed: None)")
        self._use_tensor_cores = bool(use_tensor_cores)
        self._setup(float_workspace_buffer, kv_layout, use_cuda_graph,
                    dict(paged_kv_indptr=paged_kv_indptr_buffer, paged_kv_indices=paged_kv_indices_buffer,
                         paged_kv_last_page_len=paged_kv_last_page_len_buffer), backend)

    @property
    def use_tensor_cores(self):
        return self._use_tensor_cores

    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
             pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type="float16",
             kv_data_type=None, data_type=None, sm_scale=None, rope_scale=None, rope_theta=None, non_blocking=True):
        """Plans a decode step over FlashInfer's page table (read on the host). data_type: FlashInfer's
        older name, taken as it takes it: the cache's dtype where kv_data_type is None, the query's where
        q_data_type is None. pos_encoding_mode="ROPE_LLAMA" turns q and k by rope_theta / rope_scale
        (FlashInfer's defaults 1e4 / 1.0) before our kernels run; non_blocking (how FlashInfer copies
        its plan) leaves the result unchanged: accepted, no effect."""
        q_dtype = data_type if q_data_type is None else q_data_type
        kv_dtype = data_type if kv_data_type is None else kv_data_type
        batch = check.array(last_page_len, "last_page_len", rank=1).shape[0]
        self._plan(np.arange(batch + 1, dtype=np.int32), indptr, indices, last_page_len, num_qo_heads, num_kv_heads,
                   head_dim, page_size, True, pos_encoding_mode, window_left, logits_soft_cap, sm_scale, q_dtype,
                   kv_dtype, rope_theta, rope_scale)


class BatchPrefillWithPagedKVCacheWrapper(PagedWrapper):
    """FlashInfer's prefill wrapper: qo_indptr query tokens per request (chunked prefill, mixed)."""

    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, qo_indptr_buf=None,
                 paged_kv_indptr_buf=None, paged_kv_indices_buf=None, paged_kv_last_page_len_buf=None,
                 custom_mask_buf=None, mask_indptr_buf=None, backend="auto", jit_args=None):
        """custom_mask_buf / mask_indptr_buf (custom masks) and jit_args are refused."""
        if custom_mask_buf is not None or mask_indptr_buf is not None:
            raise ValueError("custom_mask_buf / mask_indptr_buf: custom masks are not supported (causal or "
                             "non-causal only)")
        if jit_args is not None:
            raise ValueError("jit_args: FlashInfer's JIT modules are not supported (allowed: None)")
        self._setup(float_workspace_buffer, kv_layout, use_cuda_graph,
                    dict(qo_indptr=qo_indptr_buf, paged_kv_indptr=paged_kv_indptr_buf,
                         paged_kv_indices=paged_kv_indices_buf, paged_kv_last_page_len=paged_kv_last_page_len_buf),
                    backend)

    def plan(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads, num_kv_heads,
             head_dim_qk, page_size, head_dim_vo=None, custom_mask=None, packed_custom_mask=None, causal=False,
             pos_encoding_mode="NONE", use_fp16_qk_reduction=False, sm_scale=None, window_left=-1,
             logits_soft_cap=None, rope_scale=None, rope_theta=None, q_data_type="float16", kv_data_type=None,
             non_blocking=True):
        """Plans a prefill (or mixed) step over FlashInfer's page table (read on the host); RoPE and
        non_blocking as in the decode plan."""
        if use_fp16_qk_reduction:
            raise ValueError("use_fp16_qk_reduction = %r: scores are reduced in float32 (allowed: False)" % (
                use_fp16_qk_reduction,))
        if custom_mask is not None or packed_custom_mask is not None:
            raise ValueError("custom_mask is not supported (causal or non-causal only)")
        if head_dim_vo not in (None, head_dim_qk):
            raise ValueError("head_dim_vo = %s must equal head_dim_qk = %s" % (head_dim_vo, head_dim_qk))
        self._plan(qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads, num_kv_heads,
                   head_dim_qk, page_size, causal, pos_encoding_mode, window_left, logits_soft_cap, sm_scale,
                   q_data_type, kv_data_type, rope_theta, rope_scale,
                   ("paged_kv_indptr", "paged_kv_indices", "paged_kv_last_page_len"))
