"""The layers and builders behind the vLLM drop-ins: one impl per layer configuration and one builder per
model configuration, made once and reused; the keyword rules they share (num_splits, deterministic,
fa_version); and the names vLLM gives cache formats."""
from . import _C
from ._arrays import framework, to_host
from ._checks import dtype_name

_impls = {}
_builders = {}
_FP8_NAMES = {"float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}
# Backends whose results do not depend on the rest of the batch with deterministic=True (CPU_ATTN
# never splits; FLASH_ATTN's builder then never splits and runs every pass on one kernel generation;
# FLASHINFER's splits at fixed multiples).
_BATCH_INVARIANT = ("CPU_ATTN", "FLASH_ATTN", "FLASHINFER")


def cache_format(q_dtype, cache_dtype, kv_cache_dtype):
    """vLLM's kv_cache_dtype string for a cache of `cache_dtype` under a model of `q_dtype`."""
    if kv_cache_dtype is not None and kv_cache_dtype != "auto":
        return kv_cache_dtype
    if cache_dtype == q_dtype:
        return "auto"
    name = dtype_name(cache_dtype)
    if name in _FP8_NAMES:
        return _FP8_NAMES[name]
    if name == "uint8":
        return "fp8_e4m3"
    return name  # another float cache dtype ("float16" under a bf16 model); the backend decides


def host_floats(values):
    """Model constants (ALiBi slopes, sinks) as host floats; one copy per array, cached by callers."""
    if values is None:
        return None
    if framework(values) == "torch":
        return values.detach().float().cpu().tolist()
    return [float(x) for x in to_host(values).reshape(-1)]


def select(head_size, num_heads, num_kv_heads, dtype, kv_cache_dtype, block_size, device, **features):
    return _C.select_backend(head_size=head_size, num_heads=num_heads, num_kv_heads=num_kv_heads, dtype=dtype,
                             kv_cache_dtype=kv_cache_dtype, block_size=block_size, device=device, **features)


def check_num_splits(num_splits, step_num_splits=None):
    """ValueError unless num_splits (0 = the backend's choice, N = at most N parts of a request's keys, the
    builder's max_num_splits) is a count, and the one the step's schedule was made with."""
    if isinstance(num_splits, bool) or not isinstance(num_splits, int) or num_splits < 0:
        raise ValueError("num_splits = %r (allowed: 0 = the backend's choice, or a positive bound)" % (num_splits,))
    if step_num_splits is not None and num_splits != step_num_splits:
        raise ValueError("num_splits = %d, but scheduler_metadata was made with num_splits = %d (pass the same "
                         "bound to both)" % (num_splits, step_num_splits))


def check_deterministic(deterministic, backend, common_prefix_len):
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


def device_text(device):
    """'GPU is NAME (compute capability X.Y)' or 'device is the CPU', for messages."""
    if device.startswith("cuda"):
        index = int(device.split(":")[1])
        for d in _C.cuda_devices():
            if d["index"] == index:
                return "GPU is %s (compute capability %s)" % (d["name"], d["compute_capability"])
    return "device is %s" % ("the CPU" if device == "cpu" else device)


def kernel_generation(fa_version, backend, device):
    """fa_version as AttentionImplParams::kernel_generation: None = 0 (the backend's choice), 2 or 3
    where `backend` has that generation; anything else a ValueError."""
    if fa_version is None:
        return 0
    if fa_version == 4:
        raise ValueError("fa_version = 4: FA4 needs Blackwell (sm_100); this %s (allowed: None, 2, 3)" %
                         device_text(device))
    if fa_version not in (2, 3):
        raise ValueError("fa_version = %r (allowed: None = the backend's choice, 2, 3)" % (fa_version,))
    generations = backend.kernel_generations()
    if not any(g.startswith("v%d " % fa_version) for g in generations):
        raise ValueError("fa_version = %d: %s has no v%d kernels in this build (it has: %s; allowed: None)" % (
            fa_version, backend.name, fa_version, "; ".join(generations) or "none"))
    return int(fa_version)


def layout_of(cache):
    """The layout a cache [num_blocks, block_size, Hkv, D] is strided in: 'HND' where a head's tokens lie
    together, else 'NHD' (vLLM's FLASH_ATTN takes either, by the cache's stride order)."""
    strides = cache.stride() if callable(getattr(cache, "stride", None)) else cache.strides
    return "HND" if strides[1] < strides[2] else "NHD"


def layer_impl(device, q, k, kv_cache_dtype, softmax_scale, causal, window, softcap, alibi_slopes, s_aux, fa_version,
               fp8_tensor_cores=False):
    """The impl for a layer of this configuration on `device` (made once, then reused); fp8_tensor_cores:
    AttentionImplParams::fp8_tensor_cores (an FP8 query over an e4m3 cache, as FA3 runs it)."""
    num_heads, head_size, block_size, num_kv_heads = q.shape[1], q.shape[2], k.shape[1], k.shape[2]
    layout = layout_of(k)
    key = (device, q.dtype, k.dtype, num_heads, num_kv_heads, head_size, block_size, softmax_scale, causal, window,
           softcap, id(alibi_slopes), id(s_aux), kv_cache_dtype, fa_version, layout, fp8_tensor_cores)
    impl = _impls.get(key)
    if impl is not None:
        return impl[0]
    dtype = dtype_name(q.dtype)
    window = (int(window[0]), int(window[1]))
    selection = select(head_size, num_heads, num_kv_heads, dtype, kv_cache_dtype, block_size, device,
                       has_sinks=s_aux is not None, use_alibi=alibi_slopes is not None,
                       use_sliding_window=window != (-1, -1), use_soft_cap=bool(softcap), causal=causal)
    generation = kernel_generation(fa_version, selection.backend, device)
    try:
        impl = selection.backend.make_impl(
            num_heads=num_heads, head_size=head_size, num_kv_heads=num_kv_heads, scale=softmax_scale, dtype=dtype,
            alibi_slopes=host_floats(alibi_slopes), sliding_window=window, kv_cache_dtype=kv_cache_dtype,
            logits_soft_cap=softcap or None, sinks=host_floats(s_aux), kv_layout=layout, device=device,
            kernel_generation=generation, fp8_tensor_cores=fp8_tensor_cores)
    except ValueError as e:
        if generation and "kernel_generation" in str(e):  # this device cannot run the forced generation
            raise ValueError("fa_version = %d: %s" % (fa_version, e)) from e
        raise
    # The arrays stay referenced so that their ids in the key cannot be reused by others.
    _impls[key] = (impl, alibi_slopes, s_aux)
    return impl


def step_builder(backend, num_heads, num_kv_heads, head_size, block_size, dtype, kv_cache_dtype, device, window,
                 deterministic, max_num_splits, use_alibi, num_reqs, num_tokens, max_seq_len):
    """A builder for this configuration whose persistent buffers cover the step (grown when not). The
    mask is the step's (CommonAttentionMetadata.causal), not the builder's."""
    key = (backend.name, num_heads, num_kv_heads, head_size, block_size, dtype, kv_cache_dtype, device, window,
           bool(deterministic), max_num_splits, use_alibi)
    entry = _builders.get(key)
    if entry is not None and entry[1] >= num_reqs and entry[2] >= num_tokens and entry[3] >= max_seq_len:
        return entry[0]
    limits = (max(256, num_reqs), max(8192, num_tokens), max(32768, max_seq_len))
    if entry is not None:
        limits = tuple(max(2 * old, new) for old, new in zip(entry[1:], (num_reqs, num_tokens, max_seq_len)))
    builder = backend.make_builder(
        num_heads=num_heads, num_kv_heads=num_kv_heads, head_size=head_size, block_size=block_size, dtype=dtype,
        kv_cache_dtype=kv_cache_dtype, device=device, max_num_reqs=limits[0], max_num_tokens=limits[1],
        max_model_len=limits[2], use_alibi=use_alibi, sliding_window=window, deterministic=bool(deterministic),
        max_num_splits=max_num_splits)
    _builders[key] = (builder,) + limits
    return builder
