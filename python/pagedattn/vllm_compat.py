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
# No builder takes a split bound, so num_splits = N is honoured only where the backend's own plan
# never splits a request's keys into more than N parts: CPU_ATTN never splits, FLASH_ATTN stops at
# plan::kMaxSplits (32); FLASHINFER's decode cuts have no fixed bound.
_MOST_SPLITS = {"CPU_ATTN": 1, "FLASH_ATTN": 32}
# Backends whose results do not depend on the rest of the batch with deterministic=True (CPU_ATTN
# never splits; FLASH_ATTN's builder then never splits and runs every pass on one kernel generation;
# FLASHINFER's splits at fixed multiples).
_BATCH_INVARIANT = ("CPU_ATTN", "FLASH_ATTN", "FLASHINFER")


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


def _check_num_splits(num_splits, backend, common_prefix_len):
    """ValueError unless num_splits (0 = the backend's choice, N = at most N parts per request) holds on
    `backend` (a name)."""
    if num_splits == 0:
        return
    most = _MOST_SPLITS.get(backend)
    if not isinstance(num_splits, int) or most is None or num_splits < most:
        bound = "" if most is None else " or at least %d (%s never splits a request into more parts)" % (most, backend)
        raise ValueError("num_splits = %r cannot be honoured on %s: its builder takes no split bound (allowed: 0 = "
                         "the backend's choice%s)" % (num_splits, backend, bound))
    if common_prefix_len:
        raise ValueError("num_splits = %d with common_prefix_len = %d: cascade runs the prefix as a split of its own "
                         "(allowed: num_splits=0)" % (num_splits, common_prefix_len))


def _check_deterministic(deterministic, backend, common_prefix_len):
    """ValueError where deterministic=True (batch invariance) cannot hold."""
    if not deterministic:
        return
    if backend not in _BATCH_INVARIANT:
        raise ValueError("deterministic=True cannot be honoured on %s: its split schedule depends on the batch "
                         "(allowed there: False; batch-invariant backends: %s)" % (
                             backend, ", ".join(_BATCH_INVARIANT)))
    if common_prefix_len:
        raise ValueError("deterministic=True with common_prefix_len = %d: cascade makes a request's result depend on "
                         "the batch (allowed: common_prefix_len=0)" % common_prefix_len)


def _device_text(device):
    """'GPU is NAME (compute capability X.Y)' or 'device is the CPU', for messages."""
    if device.startswith("cuda"):
        index = int(device.split(":")[1])
        for d in _C.cuda_devices():
            if d["index"] == index:
                return "GPU is %s (compute capability %s)" % (d["name"], d["compute_capability"])
    return "device is %s" % ("the CPU" if device == "cpu" else device)


def _kernel_generation(fa_version, backend, device):
    """fa_version as AttentionImplParams::kernel_generation: None = 0 (the backend's choice), 2 or 3
    where `backend` has that generation; anything else a ValueError."""
    if fa_version is None:
        return 0
    if fa_version == 4:
        raise ValueError("fa_version = 4: FA4 needs Blackwell (sm_100); this %s (allowed: None, 2, 3)" %
                         _device_text(device))
    if fa_version not in (2, 3):
        raise ValueError("fa_version = %r (allowed: None = the backend's choice, 2, 3)" % (fa_version,))
    generations = backend.kernel_generations()
    if not any(g.startswith("v%d " % fa_version) for g in generations):
        raise ValueError("fa_version = %d: %s has no v%d kernels in this build (it has: %s; allowed: None)" % (
            fa_version, backend.name, fa_version, "; ".join(generations) or "none"))
    return int(fa_version)


def _layout_of(cache):
    """The layout a cache [num_blocks, block_size, Hkv, D] is strided in: 'HND' where a head's tokens lie
    together, else 'NHD' (vLLM's FLASH_ATTN takes either, by the cache's stride order)."""
    strides = cache.stride() if callable(getattr(cache, "stride", None)) else cache.strides
    return "HND" if strides[1] < strides[2] else "NHD"


def _impl(device, q, k, kv_cache_dtype, softmax_scale, causal, window, softcap, alibi_slopes, s_aux, fa_version):
    """The impl for a layer of this configuration on `device` (made once, then reused)."""
    num_heads, head_size, block_size, num_kv_heads = q.shape[1], q.shape[2], k.shape[1], k.shape[2]
    layout = _layout_of(k)
    key = (device, q.dtype, k.dtype, num_heads, num_kv_heads, head_size, block_size, softmax_scale, causal, window,
           softcap, id(alibi_slopes), id(s_aux), kv_cache_dtype, fa_version, layout)
    impl = _impls.get(key)
    if impl is not None:
        return impl[0]
    dtype = _dtype_name(q.dtype)
    window = (int(window[0]), int(window[1]))
    selection = _selection(head_size, num_heads, num_kv_heads, dtype, kv_cache_dtype, block_size, device,
                           has_sinks=s_aux is not None, use_alibi=alibi_slopes is not None,
                           use_sliding_window=window != (-1, -1), use_soft_cap=bool(softcap), causal=causal)
    generation = _kernel_generation(fa_version, selection.backend, device)
    try:
        impl = selection.backend.make_impl(
            num_heads=num_heads, head_size=head_size, num_kv_heads=num_kv_heads, scale=softmax_scale, dtype=dtype,
            alibi_slopes=_host_floats(alibi_slopes), sliding_window=window, kv_cache_dtype=kv_cache_dtype,
            logits_soft_cap=softcap or None, sinks=_host_floats(s_aux), kv_layout=layout, device=device,
            kernel_generation=generation)
    except ValueError as e:
        if generation and "kernel_generation" in str(e):  # this device cannot run the forced generation
            raise ValueError("fa_version = %d: %s" % (fa_version, e)) from e
        raise
    # The arrays stay referenced so that their ids in the key cannot be reused by others.
    _impls[key] = (impl, alibi_slopes, s_aux)
    return impl


def _builder(backend, num_heads, num_kv_heads, head_size, block_size, dtype, kv_cache_dtype, device, window,
             deterministic, use_alibi, num_reqs, num_tokens, max_seq_len):
    """A builder for this configuration whose persistent buffers cover the step (grown when not). The
    mask is the step's (CommonAttentionMetadata.causal), not the builder's."""
    key = (backend.name, num_heads, num_kv_heads, head_size, block_size, dtype, kv_cache_dtype, device, window,
           bool(deterministic), use_alibi)
    entry = _builders.get(key)
    if entry is not None and entry[1] >= num_reqs and entry[2] >= num_tokens and entry[3] >= max_seq_len:
        return entry[0]
    limits = (max(256, num_reqs), max(8192, num_tokens), max(32768, max_seq_len))
    if entry is not None:
        limits = tuple(max(2 * old, new) for old, new in zip(entry[1:], (num_reqs, num_tokens, max_seq_len)))
    builder = backend.make_builder(
        num_heads=num_heads, num_kv_heads=num_kv_heads, head_size=head_size, block_size=block_size, dtype=dtype,
        kv_cache_dtype=kv_cache_dtype, device=device, max_num_reqs=limits[0], max_num_tokens=limits[1],
        max_model_len=limits[2], use_alibi=use_alibi, sliding_window=window, deterministic=bool(deterministic))
    _builders[key] = (builder,) + limits
    return builder


class SchedulerMetadata:
    """What get_scheduler_metadata returns: one step's built metadata and the arrays it reads.

    Pass it to flash_attn_varlen_func as scheduler_metadata= (every layer of the step). Under a
    CUDA graph, change the arrays in place and call get_scheduler_metadata again before replay:
    the builder refills its persistent buffers at the same addresses.
    """

    __slots__ = ("attn_metadata", "builder", "device", "num_reqs", "backend", "causal", "deterministic",
                 "common_prefix_len", "layers", "_arrays", "_pointers")

    def __init__(self, attn_metadata, builder, device, num_reqs, arrays, backend, causal, deterministic,
                 common_prefix_len):
        self.attn_metadata = attn_metadata
        self.builder = builder
        self.device = device
        self.num_reqs = num_reqs
        # What the step was built for, checked against each call's keywords.
        self.backend = backend
        self.causal = causal
        self.deterministic = deterministic
        self.common_prefix_len = common_prefix_len
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
                           has_sinks=False, for_cudagraph_capture=False, deterministic=False):
    """Builds one step's metadata ahead of flash_attn_varlen_func (vLLM's FA3 call, plus what a paged
    builder needs: block_table, and optionally the host copies of cu_seqlens_q and cache_seqlens,
    which are otherwise copied here, waiting for the device).

    num_tokens: the query rows flash_attn_varlen_func will get (CUDA-graph padding included);
    default cu_seqlens_q[-1]. common_prefix_len > 0 runs that shared prefix as cascade (decide with
    pagedattn.cascade_attention_pays_off, as vLLM does). for_cudagraph_capture: metadata for calls
    captured in a CUDA graph (their launches stay valid when the graph replays after later builds:
    build this way again, over the same arrays, before each replay). deterministic: batch
    invariance (BuilderParams::deterministic), refused where the backend cannot hold it.
    num_splits bounds the parts a request's keys are split into (0 = the backend's choice; a bound
    the backend's plan could exceed is a ValueError). pack_gqa and sm_margin are FA3 tuning knobs
    that leave its result unchanged: accepted, no effect. headdim_v must equal headdim;
    cu_seqlens_k_new, cache_leftpad and max_seqlen_k_new (keys appended in the kernel) are refused.
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
    if max_seqlen_k_new:
        raise ValueError("max_seqlen_k_new = %r: keys appended in the kernel are not supported (allowed: 0; write "
                         "them with reshape_and_cache_flash)" % (max_seqlen_k_new,))
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
    backend = selection.backend.name
    _check_num_splits(num_splits, backend, common_prefix_len)
    _check_deterministic(deterministic, backend, common_prefix_len)
    builder = _builder(selection.backend, num_heads_q, num_heads_kv, headdim, page_size, dtype, kv_cache_dtype,
                       device, window, deterministic, has_alibi, batch_size, num_tokens, max_seqlen_k)
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
    return SchedulerMetadata(attn_metadata, builder, device, batch_size, (cu_seqlens_q, cache_seqlens, block_table),
                             backend, bool(causal), bool(deterministic), common_prefix_len)


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
    With scheduler_metadata, causal must be the schedule's and deterministic=True needs a schedule
    built with it. num_splits bounds the split (0 = the backend's choice; see get_scheduler_metadata),
    fa_version None/2/3 picks the kernel generation where the backend has it (else a ValueError).
    k_descale / v_descale are the FP8 cache's scales (scalar, [Hkv], or vLLM's [num_reqs, Hkv]
    broadcast); with a 16-bit cache they, and q_descale (queries are f16/bf16), change nothing, as in
    FA3, which reads descales only for FP8 inputs. docs/python.md lists every keyword.
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
    if cp_world_size != 1 or cp_rank != 0 or cp_tot_seqused_k is not None:
        raise ValueError("cp_world_size = %r, cp_rank = %r, cp_tot_seqused_k %s: context parallelism is not supported "
                         "(allowed: 1, 0, None)" % (cp_world_size, cp_rank,
                                                    "None" if cp_tot_seqused_k is None else "given"))
    # 0 would read as "the default" below (C++ takes <= 0 as 1/sqrt(D)); negative ones are not FA's either.
    if softmax_scale is not None and not softmax_scale > 0:
        raise ValueError("softmax_scale = %r (allowed: None = 1/sqrt(head_size), or a positive number)" %
                         (softmax_scale,))
    if softcap is not None and not softcap >= 0:
        raise ValueError("softcap = %r (allowed: 0 = no cap, or a positive cap)" % (softcap,))
    window = None if window_size is None else tuple(window_size)
    if scheduler_metadata is None:
        scheduler_metadata = get_scheduler_metadata(
            seqused_k.shape[0], max_seqlen_q, max_seqlen_k, q.shape[1], k.shape[2], q.shape[2], seqused_k,
            qkv_dtype=q.dtype, cu_seqlens_q=cu_seqlens_q, page_size=k.shape[1], causal=causal,
            window_size=window, has_softcap=bool(softcap), num_splits=num_splits, block_table=block_table,
            kv_cache_dtype=_cache_dtype(q.dtype, k.dtype, kv_cache_dtype), num_tokens=q.shape[0],
            has_alibi=alibi_slopes is not None, has_sinks=s_aux is not None, deterministic=deterministic)
    else:
        scheduler_metadata.check_arrays(cu_seqlens_q, seqused_k, block_table)
        # The mask is the step's: a schedule built for the other one would win silently.
        if bool(causal) != scheduler_metadata.causal:
            raise ValueError("causal=%s but the scheduler_metadata was built with causal=%s (pass the same causal "
                             "to get_scheduler_metadata)" % (bool(causal), scheduler_metadata.causal))
        if deterministic and not scheduler_metadata.deterministic:
            raise ValueError("deterministic=True but the scheduler_metadata was built with deterministic=False "
                             "(pass deterministic=True to get_scheduler_metadata)")
        _check_num_splits(num_splits, scheduler_metadata.backend, scheduler_metadata.common_prefix_len)
    # The step fixes the device, heads, head size and block size; a layer adds the rest.
    layer = (q.dtype, k.dtype, kv_cache_dtype, softmax_scale, causal, window, softcap, id(alibi_slopes), id(s_aux),
             fa_version, _layout_of(k))
    entry = scheduler_metadata.layers.get(layer)
    if entry is None:
        cache_dtype = _cache_dtype(q.dtype, k.dtype, kv_cache_dtype)
        impl = _impl(scheduler_metadata.device, q, k, cache_dtype, softmax_scale, causal,
                     (-1, -1) if window is None else window, softcap, alibi_slopes, s_aux, fa_version)
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
    layout = _layout_of(key_cache)
    impl_key = ("cache", device_key(key), key.dtype, key_cache.dtype, key.shape[1], key.shape[2],
                key_cache.shape[1], cache_dtype, layout)
    entry = _impls.get(impl_key)
    if entry is None:
        num_kv_heads, head_size, block_size = key.shape[1], key.shape[2], key_cache.shape[1]
        dtype, device = _dtype_name(key.dtype), device_of(key)
        selection = _selection(head_size, num_kv_heads, num_kv_heads, dtype, cache_dtype, block_size, device)
        entry = _impls[impl_key] = (selection.backend.make_impl(
            num_heads=num_kv_heads, head_size=head_size, num_kv_heads=num_kv_heads, dtype=dtype,
            kv_cache_dtype=cache_dtype, kv_layout=layout, device=device),)
    fp8 = cache_dtype.startswith("fp8")
    entry[0].do_kv_cache_update_split(key, value, key_cache, value_cache, slot_mapping, k_scale if fp8 else None,
                                      v_scale if fp8 else None, stream)


def merge_attn_states(output, prefix_output, prefix_lse, suffix_output, suffix_lse, output_lse=None,
                      prefill_tokens_with_context=None, *, stream=None):
    """vLLM's merge_attn_states: output [T, H, D] from two partial results and their LSEs [H, T]."""
    _C.merge_attn_states(output, prefix_output, prefix_lse, suffix_output, suffix_lse, output_lse,
                         prefill_tokens_with_context, stream)
