"""Drop-ins with vLLM's signatures: flash_attn_varlen_func, get_scheduler_metadata,
reshape_and_cache_flash and merge_attn_states, served by the backend the selector picks.

The KV cache is the paged cache vLLM passes: ``k``/``key_cache`` and ``v``/``value_cache``
``[num_blocks, block_size, num_kv_heads, head_size]`` (any strides with a unit head dim, the two
halves of one cache or two buffers). FP8 caches come as ``float8_e4m3fn``/``float8_e5m2`` or
``uint8`` arrays (``kv_cache_dtype`` names the format of a ``uint8`` one; ``fp8`` = e4m3).

Per call, only the arrays are converted (DLPack views) and the op queued on the caller's stream.
Impls and builders are made once per configuration and reused. ``alibi_slopes`` and ``s_aux`` are
model constants: they are read once per array and cached (change them and pass a new array).
"""
from . import _C
from ._arrays import device_key, device_of, empty, framework, order_after_build, step_slots, to_host

_impls = {}
_builders = {}
_FP8_NAMES = {"float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}


def _dtype_name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _cache_dtype(q_dtype, cache_dtype, kv_cache_dtype):
    """vLLM's kv_cache_dtype string for a cache of `cache_dtype` under a model of `q_dtype`."""
    if kv_cache_dtype is not None and kv_cache_dtype != "auto":
        return kv_cache_dtype
    if cache_dtype == q_dtype:
        return "auto"
    name = _dtype_name(cache_dtype)
    if name in _FP8_NAMES:
        return _FP8_NAMES[name]
    if name == "uint8":
        return "fp8_e4m3"
    return name  # another float cache dtype ("float16" under a bf16 model); the backend decides


def _host_floats(values):
    """Model constants (ALiBi slopes, sinks) as host floats; one copy per array, cached by callers."""
    if values is None:
        return None
    if framework(values) == "torch":
        return values.detach().float().cpu().tolist()
    return [float(x) for x in to_host(values).reshape(-1)]


def _selection(head_size, num_heads, num_kv_heads, dtype, kv_cache_dtype, block_size, device, **features):
    return _C.select_backend(head_size=head_size, num_heads=num_heads, num_kv_heads=num_kv_heads, dtype=dtype,
                             kv_cache_dtype=kv_cache_dtype, block_size=block_size, device=device, **features)


def _impl(device, q, k, kv_cache_dtype, softmax_scale, causal, window, softcap, alibi_slopes, s_aux):
    """The impl for a layer of this configuration on `device` (made once, then reused)."""
    num_heads, head_size, block_size, num_kv_heads = q.shape[1], q.shape[2], k.shape[1], k.shape[2]
    key = (device, q.dtype, k.dtype, num_heads, num_kv_heads, head_size, block_size, softmax_scale, causal, window,
           softcap, id(alibi_slopes), id(s_aux), kv_cache_dtype)
    impl = _impls.get(key)
    if impl is not None:
        return impl[0]
    dtype = _dtype_name(q.dtype)
    window = (int(window[0]), int(window[1]))
    selection = _selection(head_size, num_heads, num_kv_heads, dtype, kv_cache_dtype, block_size, device,
                           has_sinks=s_aux is not None, use_alibi=alibi_slopes is not None,
                           use_sliding_window=window != (-1, -1), use_soft_cap=bool(softcap), causal=causal)
    impl = selection.backend.make_impl(
        num_heads=num_heads, head_size=head_size, num_kv_heads=num_kv_heads, scale=softmax_scale, dtype=dtype,
        alibi_slopes=_host_floats(alibi_slopes), sliding_window=window, kv_cache_dtype=kv_cache_dtype,
        logits_soft_cap=softcap or None, sinks=_host_floats(s_aux), device=device)
    # The arrays stay referenced so that their ids in the key cannot be reused by others.
    _impls[key] = (impl, alibi_slopes, s_aux)
    return impl


def _builder(backend, num_heads, num_kv_heads, head_size, block_size, dtype, kv_cache_dtype, device, window,
             use_alibi, num_reqs, num_tokens, max_seq_len):
    """A builder for this configuration whose persistent buffers cover the step (grown when not). The
    mask is the step's (CommonAttentionMetadata.causal), not the builder's."""
    key = (backend.name, num_heads, num_kv_heads, head_size, block_size, dtype, kv_cache_dtype, device, window,
           use_alibi)
    entry = _builders.get(key)
    if entry is not None and entry[1] >= num_reqs and entry[2] >= num_tokens and entry[3] >= max_seq_len:
        return entry[0]
    limits = (max(256, num_reqs), max(8192, num_tokens), max(32768, max_seq_len))
    if entry is not None:
        limits = tuple(max(2 * old, new) for old, new in zip(entry[1:], (num_reqs, num_tokens, max_seq_len)))
    builder = backend.make_builder(
        num_heads=num_heads, num_kv_heads=num_kv_heads, head_size=head_size, block_size=block_size, dtype=dtype,
        kv_cache_dtype=kv_cache_dtype, device=device, max_num_reqs=limits[0], max_num_tokens=limits[1],
        max_model_len=limits[2], use_alibi=use_alibi, sliding_window=window)
    _builders[key] = (builder,) + limits
    return builder


class SchedulerMetadata:
    """What get_scheduler_metadata returns: one step's built metadata and the arrays it reads.

    Pass it to flash_attn_varlen_func as scheduler_metadata= (every layer of the step). Under a
    CUDA graph, change the arrays in place and call get_scheduler_metadata again before replay:
    the builder refills its persistent buffers at the same addresses.
    """

    __slots__ = ("attn_metadata", "builder", "device", "num_reqs", "layers", "_arrays", "_pointers")

    def __init__(self, attn_metadata, builder, device, num_reqs, arrays):
        self.attn_metadata = attn_metadata
        self.builder = builder
        self.device = device
        self.num_reqs = num_reqs
        self.layers = {}  # per layer configuration: (impl, whether the cache is FP8)
        self._arrays = arrays
        self._pointers = tuple(_pointer(a) for a in arrays)

    def check_arrays(self, cu_seqlens_q, seqused_k, block_table):
        """ValueError unless the call passes the arrays this metadata was built over (checked by
        address for PyTorch tensors; the same objects pass at once)."""
        given = (cu_seqlens_q, seqused_k, block_table)
        if all(a is b for a, b in zip(given, self._arrays)):
            return
        for name, array, pointer in zip(("cu_seqlens_q", "seqused_k", "block_table"), given, self._pointers):
            if pointer is not None and _pointer(array) != pointer:
                raise ValueError("%s is not the array scheduler_metadata was built over (data_ptr %#x, built "
                                 "over %#x)" % (name, _pointer(array), pointer))


def _pointer(array):
    return array.data_ptr() if hasattr(array, "data_ptr") else None


def _host_len(host, index):
    return int(host[index])


def get_scheduler_metadata(batch_size, max_seqlen_q, max_seqlen_k, num_heads_q, num_heads_kv, headdim,
                           cache_seqlens, qkv_dtype="bfloat16", headdim_v=None, cu_seqlens_q=None,
                           cu_seqlens_k_new=None, cache_leftpad=None, page_size=None, max_seqlen_k_new=0,
                           causal=False, window_size=(-1, -1), has_softcap=False, num_splits=0, pack_gqa=None,
                           sm_margin=0, *, block_table=None, kv_cache_dtype="auto", cache_seqlens_cpu=None,
                           cu_seqlens_q_cpu=None, num_tokens=None, common_prefix_len=0, has_alibi=False,
                           has_sinks=False, for_cudagraph_capture=False):
    """Builds one step's metadata ahead of flash_attn_varlen_func (vLLM's FA3 call, plus what a paged
    builder needs: block_table, and optionally the host copies of cu_seqlens_q and cache_seqlens,
    which are otherwise copied here, waiting for the device).

    num_tokens: the query rows flash_attn_varlen_func will get (CUDA-graph padding included);
    default cu_seqlens_q[-1]. common_prefix_len > 0 runs that shared prefix as cascade (decide with
    pagedattn.cascade_attention_pays_off, as vLLM does). for_cudagraph_capture: metadata for calls
    captured in a CUDA graph (their launches stay valid when the graph replays after later builds:
    build this way again, over the same arrays, before each replay). pack_gqa, num_splits and
    sm_margin are FA3 tuning knobs the builder's own plan replaces; headdim_v must equal headdim;
    cu_seqlens_k_new and cache_leftpad are not supported.
    """
    if block_table is None:
        raise ValueError("block_table is required: pagedattn's metadata describes the paged KV cache")
    if cu_seqlens_q is None:
        raise ValueError("cu_seqlens_q is required")
    if page_size is None:
        raise ValueError("page_size is required (the KV cache's block_size)")
    if headdim_v not in (None, headdim):
        raise ValueError("headdim_v = %s must equal headdim = %d" % (headdim_v, headdim))
    if cu_seqlens_k_new is not None or cache_leftpad is not None:
        raise ValueError("cu_seqlens_k_new and cache_leftpad are not supported")
    qsl_host = to_host(cu_seqlens_q) if cu_seqlens_q_cpu is None else cu_seqlens_q_cpu
    seq_host = to_host(cache_seqlens) if cache_seqlens_cpu is None else cache_seqlens_cpu
    if num_tokens is None:
        num_tokens = _host_len(qsl_host, batch_size)
    device = device_of(cu_seqlens_q)
    dtype = _dtype_name(qkv_dtype)
    window = (-1, -1) if window_size is None else (int(window_size[0]), int(window_size[1]))
    selection = _selection(headdim, num_heads_q, num_heads_kv, dtype, kv_cache_dtype, page_size, device,
                           has_sinks=has_sinks, use_alibi=has_alibi, use_sliding_window=window != (-1, -1),
                           use_soft_cap=bool(has_softcap), causal=causal)
    builder = _builder(selection.backend, num_heads_q, num_heads_kv, headdim, page_size, dtype, kv_cache_dtype,
                       device, window, has_alibi, batch_size, num_tokens, max_seqlen_k)
    meta = _C.CommonAttentionMetadata(
        query_start_loc=cu_seqlens_q, query_start_loc_cpu=qsl_host, seq_lens=cache_seqlens, seq_lens_cpu=seq_host,
        block_table_tensor=block_table,
        slot_mapping=step_slots(qsl_host, seq_host, block_table, page_size, num_tokens), num_reqs=batch_size,
        num_actual_tokens=num_tokens, max_query_len=max_seqlen_q, max_seq_len=max_seqlen_k, causal=causal)
    if for_cudagraph_capture:
        if common_prefix_len:
            raise ValueError("common_prefix_len = %d: cascade is not captured in CUDA graphs" % common_prefix_len)
        attn_metadata = builder.build_for_cudagraph_capture(meta)
    else:
        attn_metadata = builder.build(common_prefix_len, meta)
    order_after_build(device, cu_seqlens_q)
    return SchedulerMetadata(attn_metadata, builder, device, batch_size, (cu_seqlens_q, cache_seqlens, block_table))


def flash_attn_varlen_func(q, k, v, max_seqlen_q, cu_seqlens_q, max_seqlen_k, cu_seqlens_k=None, seqused_k=None,
                           q_v=None, dropout_p=0.0, softmax_scale=None, causal=False, window_size=None, softcap=0.0,
                           alibi_slopes=None, deterministic=False, return_attn_probs=False, block_table=None,
                           return_softmax_lse=False, out=None, scheduler_metadata=None, q_descale=None,
                           k_descale=None, v_descale=None, num_splits=0, fa_version=None, s_aux=None,
                           cp_world_size=1, cp_rank=0, cp_tot_seqused_k=None, *, kv_cache_dtype=None, stream=None):
    """vLLM's flash_attn_varlen_func over a paged KV cache (k, v: the cache's K and V halves).

    Returns out [total_q, Hq, D], or (out, softmax_lse [Hq, total_q] float32) with
    return_softmax_lse. Without scheduler_metadata the step's metadata is built here, which reads
    cu_seqlens_q and seqused_k on the host (a device wait on CUDA, refused under graph capture).
    num_splits, deterministic and fa_version are accepted and left to the backend's own plan.
    k_descale / v_descale are the FP8 cache's scales (scalar, [Hkv], or vLLM's [num_reqs, Hkv]
    broadcast); q_descale is unused (queries are f16/bf16).
    """
    if block_table is None:
        raise ValueError("block_table is required: k and v must be the paged KV cache "
                         "[num_blocks, block_size, num_kv_heads, head_size]")
    if cu_seqlens_k is not None:
        raise ValueError("cu_seqlens_k: with a paged cache pass seqused_k (keys per request) instead")
    if seqused_k is None:
        raise ValueError("seqused_k is required (keys per request)")
    if dropout_p:
        raise ValueError("dropout_p = %r: only 0.0 (inference) is supported" % (dropout_p,))
    if return_attn_probs:
        raise ValueError("return_attn_probs is not supported")
    if q_v is not None:
        raise ValueError("q_v is not supported")
    if cp_world_size != 1:
        raise ValueError("cp_world_size = %r: context parallelism is not supported" % (cp_world_size,))
    window = None if window_size is None else tuple(window_size)
    if scheduler_metadata is None:
        scheduler_metadata = get_scheduler_metadata(
            seqused_k.shape[0], max_seqlen_q, max_seqlen_k, q.shape[1], k.shape[2], q.shape[2], seqused_k,
            qkv_dtype=q.dtype, cu_seqlens_q=cu_seqlens_q, page_size=k.shape[1], causal=causal,
            window_size=window, has_softcap=bool(softcap), block_table=block_table,
            kv_cache_dtype=_cache_dtype(q.dtype, k.dtype, kv_cache_dtype), num_tokens=q.shape[0],
            has_alibi=alibi_slopes is not None, has_sinks=s_aux is not None)
    else:
        scheduler_metadata.check_arrays(cu_seqlens_q, seqused_k, block_table)
    # The step fixes the device, heads, head size and block size; a layer adds the rest.
    layer = (q.dtype, k.dtype, kv_cache_dtype, softmax_scale, causal, window, softcap, id(alibi_slopes), id(s_aux))
    entry = scheduler_metadata.layers.get(layer)
    if entry is None:
        cache_dtype = _cache_dtype(q.dtype, k.dtype, kv_cache_dtype)
        impl = _impl(scheduler_metadata.device, q, k, cache_dtype, softmax_scale, causal,
                     (-1, -1) if window is None else window, softcap, alibi_slopes, s_aux)
        entry = scheduler_metadata.layers[layer] = (impl, cache_dtype.startswith("fp8"), alibi_slopes, s_aux)
    impl, fp8 = entry[0], entry[1]
    if out is None:
        out = empty(q, q.shape)
    lse = empty(q, (q.shape[1], q.shape[0]), float32=True) if return_softmax_lse else None
    impl.forward_split(q, k, v, scheduler_metadata.attn_metadata, out, lse, k_descale if fp8 else None,
                       v_descale if fp8 else None, stream)
    return (out, lse) if return_softmax_lse else out


def reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype="auto", k_scale=None,
                            v_scale=None, *, stream=None):
    """vLLM's reshape_and_cache_flash: writes key/value [num_tokens, Hkv, D] into the paged cache at
    slot_mapping [num_tokens] int64 (-1 skipped), FP8 caches as saturate(x / scale)."""
    cache_dtype = _cache_dtype(key.dtype, key_cache.dtype, kv_cache_dtype)
    impl_key = ("cache", device_key(key), key.dtype, key_cache.dtype, key.shape[1], key.shape[2],
                key_cache.shape[1], cache_dtype)
    entry = _impls.get(impl_key)
    if entry is None:
        num_kv_heads, head_size, block_size = key.shape[1], key.shape[2], key_cache.shape[1]
        dtype, device = _dtype_name(key.dtype), device_of(key)
        selection = _selection(head_size, num_kv_heads, num_kv_heads, dtype, cache_dtype, block_size, device)
        entry = _impls[impl_key] = (selection.backend.make_impl(
            num_heads=num_kv_heads, head_size=head_size, num_kv_heads=num_kv_heads, dtype=dtype,
            kv_cache_dtype=cache_dtype, device=device),)
    fp8 = cache_dtype.startswith("fp8")
    entry[0].do_kv_cache_update_split(key, value, key_cache, value_cache, slot_mapping, k_scale if fp8 else None,
                                      v_scale if fp8 else None, stream)


def merge_attn_states(output, prefix_output, prefix_lse, suffix_output, suffix_lse, output_lse=None,
                      prefill_tokens_with_context=None, *, stream=None):
    """vLLM's merge_attn_states: output [T, H, D] from two partial results and their LSEs [H, T]."""
    _C.merge_attn_states(output, prefix_output, prefix_lse, suffix_output, suffix_lse, output_lse,
                         prefill_tokens_with_context, stream)
