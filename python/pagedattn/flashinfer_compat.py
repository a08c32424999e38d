"""FlashInfer-style plan/run wrappers: BatchDecodeWithPagedKVCacheWrapper and
BatchPrefillWithPagedKVCacheWrapper with FlashInfer's page table (``indptr``, ``indices``,
``last_page_len``), cache (``[num_pages, 2, page_size, Hkv, D]`` NHD or ``[num_pages, 2, Hkv,
page_size, D]`` HND, or the (K, V) halves) and LSE (``[total_q, Hq]``, base 2).

They bind to the FLASHINFER backend (``backend="flashinfer"``, the default): in a build or on a
machine without it, making a wrapper is a ValueError that gives the backend's reasons.
``backend=`` runs the same calls on another backend ("flash_attn", "cpu"). ``plan()`` reads the page
table on the host and builds the step's metadata (once per step, for every layer); ``run()`` only
converts the arrays and queues the kernel on the caller's stream. ``run(k_scale=, v_scale=)`` apply as
FlashInfer applies them on every cache dtype (``sm_scale *= k_scale``, ``out *= v_scale``). Not
supported: ``use_cuda_graph`` (capture the engine API's forward instead), positional encodings other
than "NONE", custom masks, ``use_fp16_qk_reduction=True``. docs/python.md lists every keyword.
"""
import math

import numpy as np

from . import _C
from ._arrays import (device_of, empty, from_host, order_after_build, permuted, scale_in_place, step_slots,
                      store_transposed, to_host)
from .vllm_compat import _cache_dtype, _dtype_name, _host_floats

_LN2 = math.log(2.0)


def _host_ints(array):
    return np.asarray(to_host(array)).astype(np.int64)


def _host_scale(value, name):
    """A FlashInfer scale (a float, or a 0-d / 1-element array) as a host float; None stays None."""
    if value is None or not hasattr(value, "__dlpack_device__"):
        return None if value is None else float(value)
    flat = to_host(value).reshape(-1)
    if flat.shape[0] != 1:
        raise ValueError("%s has %d elements (allowed with a 16-bit cache: a float or a 0-d / 1-element array, "
                         "as FlashInfer takes)" % (name, flat.shape[0]))
    return float(flat[0])


class _PagedWrapper:
    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, *, backend="flashinfer"):
        if use_cuda_graph:
            raise ValueError("use_cuda_graph=True is not supported: capture the engine API's forward "
                             "(AttentionMetadataBuilder.build_for_cudagraph_capture) instead")
        found = _C.find_backend(backend)
        if found is None:
            raise ValueError("backend = %r is unknown (allowed: %s)" % (
                backend, ", ".join(b.name for b in _C.registered_backends())))
        if found.unavailable_reason():
            raise ValueError("backend %s: %s" % (found.name, found.unavailable_reason()))
        if kv_layout not in ("NHD", "HND"):
            raise ValueError("kv_layout = %r (allowed: 'NHD', 'HND')" % (kv_layout,))
        self._backend = found
        self._layout = kv_layout
        self._workspace = float_workspace_buffer  # the device and framework to plan for
        self._device = device_of(float_workspace_buffer)
        self._builders, self._impls, self._scales = {}, {}, {}
        self._step = None

    def _plan(self, qo_indptr, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
              causal, pos_encoding_mode, window_left, logits_soft_cap, sm_scale, q_data_type, kv_data_type):
        if pos_encoding_mode != "NONE":
            raise ValueError("pos_encoding_mode = %r (allowed: 'NONE'; apply RoPE before the call)" % (
                pos_encoding_mode,))
        # The library reads a scale <= 0 as 1/sqrt(D) and a cap <= 0 as none: refuse them rather than substitute.
        if sm_scale is not None and not sm_scale > 0:
            raise ValueError("sm_scale = %r (allowed: None = 1/sqrt(head_dim), or a positive number)" % (sm_scale,))
        if logits_soft_cap is not None and not logits_soft_cap >= 0:
            raise ValueError("logits_soft_cap = %r (allowed: None or 0 = no cap, or a positive cap)" % (
                logits_soft_cap,))
        pages = np.diff(_host_ints(indptr))
        if len(pages) and pages.min() < 0:
            raise ValueError("indptr must be non-decreasing")
        last = _host_ints(last_page_len)
        if len(last) != len(pages):
            raise ValueError("last_page_len has %d entries; indptr describes %d requests" % (len(last), len(pages)))
        seq_lens = np.where(pages > 0, (pages - 1) * page_size + last, 0).astype(np.int32)
        table = np.zeros((len(pages), max(int(pages.max(initial=0)), 1)), np.int32)
        flat, starts = _host_ints(indices), _host_ints(indptr)
        for r, n in enumerate(pages):
            table[r, :n] = flat[starts[r]:starts[r] + n]
        qsl = _host_ints(qo_indptr).astype(np.int32)
        query_lens = np.diff(qsl)
        builder, kv_dtype = self._builder(num_qo_heads, num_kv_heads, head_dim, page_size, causal, window_left,
                                          logits_soft_cap, q_data_type, kv_data_type, len(pages), int(qsl[-1]),
                                          int(seq_lens.max(initial=0)))
        threshold = builder.reorder_batch_threshold()
        if threshold is not None and len(query_lens):
            decode = query_lens <= threshold
            first_prefill = int(np.argmax(~decode)) if (~decode).any() else len(decode)
            if decode[first_prefill:].any():
                raise ValueError("%s needs requests with qo_len <= %d first: reorder the batch "
                                 "(reorder_batch_to_split_decodes_and_prefills)" % (self._backend.name, threshold))
        like = self._workspace
        meta = _C.CommonAttentionMetadata(
            query_start_loc=from_host(like, qsl), query_start_loc_cpu=qsl, seq_lens=from_host(like, seq_lens),
            seq_lens_cpu=seq_lens, block_table_tensor=from_host(like, table),
            slot_mapping=step_slots(qsl, seq_lens, table, page_size, int(qsl[-1])), num_reqs=len(pages), num_actual_tokens=int(qsl[-1]),
            max_query_len=int(query_lens.max(initial=0)), max_seq_len=int(seq_lens.max(initial=0)), causal=causal)
        metadata = builder.build(0, meta)
        order_after_build(self._device, like)
        self._step = dict(metadata=metadata, meta=meta, heads=(num_qo_heads, num_kv_heads, head_dim),
                          kv_dtype=kv_dtype, q_dtype=q_data_type, scale=sm_scale, causal=causal,
                          window=(window_left, 0 if causal else -1) if window_left >= 0 else (-1, -1),
                          softcap=logits_soft_cap, tokens=int(qsl[-1]))

    def _builder(self, hq, hkv, d, page_size, causal, window_left, softcap, q_dtype, kv_dtype, num_reqs, num_tokens,
                 max_seq_len):
        dtype = _dtype_name(q_dtype)
        kv = _cache_dtype(q_dtype, q_dtype if kv_dtype is None else kv_dtype, None)
        window = (window_left, 0 if causal else -1) if window_left >= 0 else (-1, -1)
        _C.select_backend(head_size=d, num_heads=hq, num_kv_heads=hkv, dtype=dtype, kv_cache_dtype=kv,
                          block_size=page_size, use_sliding_window=window != (-1, -1), use_soft_cap=bool(softcap),
                          causal=causal, device=self._device, backend=self._backend.name)
        key = (hq, hkv, d, page_size, dtype, kv, window)  # the mask is the step's, not the builder's
        entry = self._builders.get(key)
        if entry is None or any(have < need for have, need in zip(entry[1], (num_reqs, num_tokens, max_seq_len))):
            limits = (max(256, num_reqs), max(8192, num_tokens), max(32768, max_seq_len))
            builder = self._backend.make_builder(
                num_heads=hq, num_kv_heads=hkv, head_size=d, block_size=page_size, dtype=dtype, kv_cache_dtype=kv,
                device=self._device, max_num_reqs=limits[0], max_num_tokens=limits[1],
                max_model_len=limits[2], sliding_window=window)
            entry = self._builders[key] = (builder, limits)
        return entry[0], kv

    def _impl(self, step, sinks, scale):
        key = (step["heads"], step["kv_dtype"], step["q_dtype"], scale, step["window"], step["softcap"], id(sinks))
        entry = self._impls.get(key)
        if entry is None:
            hq, hkv, d = step["heads"]
            impl = self._backend.make_impl(
                num_heads=hq, head_size=d, num_kv_heads=hkv, scale=scale, dtype=_dtype_name(step["q_dtype"]),
                sliding_window=step["window"], kv_cache_dtype=step["kv_dtype"], logits_soft_cap=step["softcap"],
                sinks=_host_floats(sinks), kv_layout=self._layout, device=self._device)
            entry = self._impls[key] = (impl, sinks)
        return entry[0]

    def _scale(self, value):
        """A k/v scale as the library takes it: arrays as given, Python floats as a cached [1] array."""
        if value is None or hasattr(value, "__dlpack__"):
            return value
        if value not in self._scales:
            self._scales[value] = from_host(self._workspace, np.array([value], np.float32))
        return self._scales[value]

    def run(self, q, paged_kv_cache, *, k_scale=None, v_scale=None, out=None, lse=None, return_lse=False,
            sinks=None, stream=None):
        """Attention of q [total_q, Hq, D] over the paged cache for the planned step: out, or
        (out, lse [total_q, Hq] float32, base 2 as FlashInfer returns it) with return_lse.
        k_scale / v_scale: an FP8 cache's dequantization scales (float, [1] or [Hkv]); with a 16-bit
        cache FlashInfer's rule (a float or 1-element array): sm_scale *= k_scale, out *= v_scale."""
        step = self._step
        if step is None:
            raise ValueError("run() before plan()")
        scale, v_factor = step["scale"], None
        if step["kv_dtype"].startswith("fp8"):
            scales = (self._scale(k_scale), self._scale(v_scale))
        else:
            scales, k_factor, v_factor = (None, None), _host_scale(k_scale, "k_scale"), _host_scale(v_scale, "v_scale")
            if k_factor is not None:
                if not k_factor > 0:  # folded into sm_scale, which must stay positive
                    raise ValueError("k_scale = %r (allowed: a positive scale)" % (k_factor,))
                scale = (1.0 / math.sqrt(step["heads"][2]) if scale is None else scale) * k_factor
        impl = self._impl(step, sinks, scale)
        if out is None:
            out = empty(q, q.shape)
        lse_rows = empty(q, (q.shape[1], q.shape[0]), float32=True) if return_lse else None
        if isinstance(paged_kv_cache, (tuple, list)):
            k, v = paged_kv_cache
            if self._layout == "HND":  # [pages, Hkv, page_size, D] halves
                k, v = permuted(k, (0, 2, 1, 3)), permuted(v, (0, 2, 1, 3))
            impl.forward_split(q, k, v, step["metadata"], out, lse_rows, *scales, stream)
        else:
            cache = permuted(paged_kv_cache, (0, 1, 3, 2, 4)) if self._layout == "HND" else paged_kv_cache
            impl.forward(q, None, None, cache, step["metadata"], out, lse_rows, *scales, stream)
        if v_factor is not None:
            scale_in_place(out, v_factor)  # FlashInfer's own step after its kernel; the LSE is unchanged
        if not return_lse:
            return out
        if lse is None:
            lse = empty(q, (q.shape[0], q.shape[1]), float32=True)
        store_transposed(lse, lse_rows, 1.0 / _LN2)
        return out, lse


class BatchDecodeWithPagedKVCacheWrapper(_PagedWrapper):
    """FlashInfer's decode wrapper: one query token per request."""

    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
             pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type="float16",
             kv_data_type=None, data_type=None, sm_scale=None, rope_scale=None, rope_theta=None, non_blocking=True):
        """Plans a decode step over FlashInfer's page table (read on the host). rope_scale and
        rope_theta (read by FlashInfer only with RoPE in the kernel, refused here) and non_blocking
        (how FlashInfer copies its plan) leave the result unchanged: accepted, no effect."""
        q_dtype = data_type if data_type is not None else q_data_type
        batch = len(_host_ints(indptr)) - 1
        self._plan(np.arange(batch + 1, dtype=np.int32), indptr, indices, last_page_len, num_qo_heads, num_kv_heads,
                   head_dim, page_size, True, pos_encoding_mode, window_left, logits_soft_cap, sm_scale, q_dtype,
                   kv_data_type)


class BatchPrefillWithPagedKVCacheWrapper(_PagedWrapper):
    """FlashInfer's prefill wrapper: qo_indptr query tokens per request (chunked prefill, mixed)."""

    def plan(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads, num_kv_heads,
             head_dim_qk, page_size, head_dim_vo=None, custom_mask=None, packed_custom_mask=None, causal=False,
             pos_encoding_mode="NONE", use_fp16_qk_reduction=False, sm_scale=None, window_left=-1,
             logits_soft_cap=None, rope_scale=None, rope_theta=None, q_data_type="float16", kv_data_type=None,
             non_blocking=True):
        """Plans a prefill (or mixed) step over FlashInfer's page table (read on the host).
        rope_scale, rope_theta and non_blocking: accepted, no effect (as in the decode plan)."""
        if use_fp16_qk_reduction:
            raise ValueError("use_fp16_qk_reduction = %r: scores are reduced in float32 (allowed: False)" % (
                use_fp16_qk_reduction,))
        if custom_mask is not None or packed_custom_mask is not None:
            raise ValueError("custom_mask is not supported (causal or non-causal only)")
        if head_dim_vo not in (None, head_dim_qk):
            raise ValueError("head_dim_vo = %s must equal head_dim_qk = %d" % (head_dim_vo, head_dim_qk))
        self._plan(qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads, num_kv_heads,
                   head_dim_qk, page_size, causal, pos_encoding_mode, window_left, logits_soft_cap, sm_scale,
                   q_data_type, kv_data_type)
