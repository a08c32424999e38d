"""Drop-ins with vLLM's signatures (``vllm.vllm_flash_attn``, ``vllm._custom_ops`` and the cascade of
vLLM's FlashAttention backend): flash_attn_varlen_func, get_scheduler_metadata,
is_fa_version_supported, fa_version_unsupported_reason, cascade_attention, reshape_and_cache_flash
and merge_attn_states, served by the backend the selector picks.

The KV cache is the paged cache vLLM passes: ``k``/``key_cache`` and ``v``/``value_cache``
``[num_blocks, block_size, num_kv_heads, head_size]`` (any strides with a unit head dim, the two
halves of one cache or two buffers). FP8 caches come as ``float8_e4m3fn``/``float8_e5m2`` or
``uint8`` arrays (``kv_cache_dtype`` names the format of a ``uint8`` one; ``fp8`` = e4m3).

Every argument is checked before use (a ValueError naming it). Per call, only the arrays are
converted (DLPack views) and the op queued on the caller's stream. Impls and builders are made once
per configuration and reused. ``alibi_slopes`` and ``s_aux`` are model constants: they are read once
per array and cached (change them and pass a new array). docs/python.md lists every keyword.
"""
from . import _C
from . import _checks as check
from . import _vllm_cp as cp
from . import _vllm_layers as layers
from . import _vllm_schedule as schedules
from ._arrays import device_of, empty, framework, on_callers_stream, to_host
from ._cache_write import write_kv_cache

__all__ = ["flash_attn_varlen_func", "get_scheduler_metadata", "is_fa_version_supported",
           "fa_version_unsupported_reason", "cascade_attention", "reshape_and_cache_flash", "merge_attn_states"]

_FA_VERSIONS = (2, 3, 4)


def fa_version_unsupported_reason(fa_version, device=None):
    """None where flash_attn_varlen_func(fa_version=N) runs on `device` (default: the best device here),
    else why not (vLLM's contract: FlashAttention 2, 3 or 4)."""
    if fa_version not in _FA_VERSIONS:
        raise ValueError("fa_version = %r (allowed: 2, 3, 4)" % (fa_version,))
    device = str(_C.default_device() if device is None else device)
    device = "cuda:0" if device == "cuda" else device
    if fa_version == 4:
        return "FA4 needs Blackwell (sm_100); this %s" % layers.device_text(device)
    if not device.startswith("cuda"):
        return ("FA%d runs on CUDA GPUs; this %s (CPU_ATTN serves flash_attn_varlen_func here with "
                "fa_version=None)" % (fa_version, layers.device_text(device)))
    backend = _C.find_backend("flash_attn")
    if backend.unavailable_reason():
        return "FA%d: %s" % (fa_version, backend.unavailable_reason())
    if not any(g.startswith("v%d " % fa_version) for g in backend.kernel_generations()):
        return "FA%d: this build has no v%d kernels (it has: %s)" % (
            fa_version, fa_version, "; ".join(backend.kernel_generations()) or "none")
    if fa_version == 3:
        index = int(device.split(":")[1])
        capability = next((d["compute_capability"] for d in _C.cuda_devices() if d["index"] == index), None)
        if capability is None or not str(capability).startswith("9."):
            return "FA3 needs Hopper (sm_90); this %s" % layers.device_text(device)
    return None


def is_fa_version_supported(fa_version, device=None):
    """Whether flash_attn_varlen_func(fa_version=N) runs on `device` (fa_version_unsupported_reason says why not)."""
    return fa_version_unsupported_reason(fa_version, device) is None


def get_scheduler_metadata(batch_size, max_seqlen_q, max_seqlen_k, num_heads_q, num_heads_kv, headdim,
                           cache_seqlens, qkv_dtype="bfloat16", headdim_v=None, cu_seqlens_q=None,
                           cu_seqlens_k_new=None, cache_leftpad=None, page_size=None, max_seqlen_k_new=0,
                           causal=False, window_size=(-1, -1), has_softcap=False, num_splits=0, pack_gqa=None,
                           sm_margin=0, *, block_table=None, kv_cache_dtype="auto", cache_seqlens_cpu=None,
                           cu_seqlens_q_cpu=None, num_tokens=None, common_prefix_len=0, has_alibi=False,
                           has_sinks=False, for_cudagraph_capture=False, deterministic=False):
    """vLLM's FA3 call: the step's schedule, an int32 array to pass as flash_attn_varlen_func's
    scheduler_metadata (every layer of the step; a copy of it in a persistent buffer works too).

    It reads cu_seqlens_q and cache_seqlens on the host (give cu_seqlens_q_cpu / cache_seqlens_cpu to
    skip the copy). The metadata is built at the first layer's call, which passes the block table;
    with block_table= it is built here (what a captured CUDA graph needs: build before capture, and
    again, over the same arrays changed in place, before each replay). num_tokens: the query rows the
    calls will pass (CUDA-graph padding included; default cu_seqlens_q[-1]). common_prefix_len > 0
    runs that shared prefix as cascade. deterministic: batch invariance (refused where the backend
    cannot hold it). num_splits bounds the split (0 = the backend's choice). pack_gqa and sm_margin
    are FA3 tuning knobs that leave its result unchanged. headdim_v must equal headdim;
    cu_seqlens_k_new, cache_leftpad and max_seqlen_k_new (keys appended in the kernel) are refused.
    """
    batch_size = check.integer(batch_size, "batch_size", low=0)
    max_seqlen_q = check.integer(max_seqlen_q, "max_seqlen_q", low=0)
    max_seqlen_k = check.integer(max_seqlen_k, "max_seqlen_k", low=0)
    heads = tuple(check.integer(v, n, low=1) for v, n in ((num_heads_q, "num_heads_q"), (num_heads_kv, "num_heads_kv"),
                                                          (headdim, "headdim")))
    if heads[0] % heads[1]:
        raise ValueError("num_heads_q = %d is not a multiple of num_heads_kv = %d" % heads[:2])
    if headdim_v not in (None, headdim):
        raise ValueError("headdim_v = %s must equal headdim = %d" % (headdim_v, headdim))
    if cu_seqlens_k_new is not None or cache_leftpad is not None:
        raise ValueError("cu_seqlens_k_new and cache_leftpad are not supported")
    if max_seqlen_k_new:
        raise ValueError("max_seqlen_k_new = %r: keys appended in the kernel are not supported (allowed: 0; write "
                         "them with reshape_and_cache_flash)" % (max_seqlen_k_new,))
    if cu_seqlens_q is None:
        raise ValueError("cu_seqlens_q is None (required: the query offsets [batch_size + 1])")
    if page_size is None:
        raise ValueError("page_size is None (required: the KV cache's block_size)")
    page_size = check.integer(page_size, "page_size", low=1)
    check.array(cu_seqlens_q, "cu_seqlens_q", rank=1, dtypes=check.INDEX_DTYPES)
    check.array(cache_seqlens, "cache_seqlens", rank=1, dtypes=check.INDEX_DTYPES)
    window = check.window(window_size)
    layers.check_num_splits(num_splits)
    qsl_host = to_host(cu_seqlens_q) if cu_seqlens_q_cpu is None else cu_seqlens_q_cpu
    seq_host = to_host(cache_seqlens) if cache_seqlens_cpu is None else cache_seqlens_cpu
    if num_tokens is not None:
        num_tokens = check.integer(num_tokens, "num_tokens", low=0)
    offsets = check.offsets(qsl_host, "cu_seqlens_q", batch_size, num_tokens, "q (num_tokens)")
    seqs = check.lengths(seq_host, "cache_seqlens", batch_size)
    _check_lengths(offsets, seqs, max_seqlen_q, max_seqlen_k)
    num_tokens = int(offsets[-1]) if num_tokens is None else num_tokens
    step = schedules.Step(device_of(cu_seqlens_q), (cu_seqlens_q, cache_seqlens), (qsl_host, seq_host), num_tokens,
                          (max_seqlen_q, max_seqlen_k), heads, page_size, causal, num_splits, deterministic,
                          check.integer(common_prefix_len, "common_prefix_len", low=0), for_cudagraph_capture)
    if block_table is not None:
        check.block_table(block_table, "block_table", batch_size, seqs, page_size)
        dtype = check.float_dtype(qkv_dtype, "qkv_dtype", "; with block_table give the model's dtype")
        step.metadata(block_table, schedules.layer_kind(dtype, kv_cache_dtype, window, has_alibi, has_sinks,
                                                       has_softcap))
    return schedules.hold(step)


def _check_lengths(offsets, seq_lens, max_seqlen_q, max_seqlen_k):
    """Each request's new tokens are among its keys, and the maxima bound the lengths."""
    query_lens = offsets[1:] - offsets[:-1]
    for what, bad in (("more query tokens than keys (its new tokens are keys too)", query_lens > seq_lens),
                      ("more query tokens than max_seqlen_q = %d" % max_seqlen_q, query_lens > max_seqlen_q),
                      ("more keys than max_seqlen_k = %d" % max_seqlen_k, seq_lens > max_seqlen_k)):
        if bad.any():
            r = int(bad.argmax())
            raise ValueError("request %d has %s: %d query tokens (cu_seqlens_q), %d keys (seqused_k)" % (
                r, what, query_lens[r], seq_lens[r]))


def _fp8_query(q, q_descale, cu_seqlens_q, num_kv_heads, out):
    """FA3's FP8 query (float8_e4m3fn, as vLLM quantizes it beside an FP8 cache): (the dtype the layer computes in,
    out's or bfloat16 without out; q_descale as float32 [1] or [num_reqs, Hkv] on q's device, or None for 1)."""
    if check.dtype_name(q.dtype) != "float8_e4m3fn" or framework(q) != "torch":
        raise ValueError("q is %s %s: FP8 queries must be torch float8_e4m3fn tensors (allowed: float16, "
                         "bfloat16, float8_e4m3fn; float32 on the CPU)" % (framework(q), check.dtype_name(q.dtype)))
    import torch
    dtype = torch.bfloat16 if out is None else out.dtype
    if dtype not in (torch.float16, torch.bfloat16):
        raise ValueError("out is %s: an FP8 query's output is float16 or bfloat16" % check.dtype_name(dtype))
    if q_descale is None:
        return dtype, None
    batch = cu_seqlens_q.shape[0] - 1
    scale = torch.as_tensor(q_descale).to(q.device, torch.float32)
    if scale.dim() == 2 and tuple(scale.shape) == (batch, num_kv_heads):
        return dtype, scale
    if scale.numel() == 1 and scale.dim() < 2:
        return dtype, scale.reshape(1)
    raise ValueError("q_descale is %s; expected a scalar, [1] or [num_reqs, num_kv_heads] = [%d, %d]" % (
        list(scale.shape), batch, num_kv_heads))


def _dequantized_query(q, q_scale, cu_seqlens_q, dtype, stream):
    """q times q_scale (from _fp8_query) in `dtype`, in one pass of dequantize_fp8_query (PyTorch's float8 cast
    runs at a quarter of the memory's bandwidth)."""
    import torch
    out = torch.empty(q.shape, dtype=dtype, device=q.device)
    if q_scale is None:
        _C.dequantize_fp8_query(out, q, stream=stream)
    elif q_scale.dim() == 2:
        _C.dequantize_fp8_query(out, q, q_scale, cu_seqlens_q.to(q.device, torch.int32), stream)
    else:
        _C.dequantize_fp8_query(out, q, q_scale, stream=stream)
    return out


def _check_attention_arrays(q, k, v, cu_seqlens_q, seqused_k, block_table, out):
    """The arrays of a flash_attn_varlen_func call: ranks, dtypes and the shapes they share."""
    check.array(q, "q", rank=3)
    check.array(q, "q", dtypes=check.FLOAT_DTYPES)
    check.array(k, "k", rank=4, dtypes=check.FLOAT_DTYPES + check.FP8_DTYPES)
    check.array(v, "v", rank=4, dtypes=(check.dtype_name(k.dtype),), shape=k.shape, why="k's shape")
    if k.shape[3] != q.shape[2]:
        raise ValueError("k has head size %d but q has %d (k is [num_blocks, block_size, num_kv_heads, head_size])"
                         % (k.shape[3], q.shape[2]))
    if k.shape[2] == 0 or q.shape[1] % k.shape[2]:
        raise ValueError("q has %d heads, not a multiple of k's %d KV heads" % (q.shape[1], k.shape[2]))
    check.array(cu_seqlens_q, "cu_seqlens_q", rank=1, dtypes=check.INDEX_DTYPES)
    batch = cu_seqlens_q.shape[0] - 1
    check.array(seqused_k, "seqused_k", rank=1, dtypes=check.INDEX_DTYPES, shape=(batch,),
                why="one length per request (cu_seqlens_q has %d offsets)" % (batch + 1))
    check.array(block_table, "block_table", rank=2, dtypes=("int32",))
    if block_table.shape[0] < batch:
        raise ValueError("block_table has %d rows (expected one per request: %d)" % (block_table.shape[0], batch))
    if out is not None:
        check.array(out, "out", dtypes=(check.dtype_name(q.dtype),), shape=q.shape, why="q's shape and dtype")


def _check_constants(alibi_slopes, s_aux, num_heads):
    for name, values in (("alibi_slopes", alibi_slopes), ("s_aux", s_aux)):
        if values is not None:
            check.array(values, name, rank=1, shape=(num_heads,), why="one per query head")


@on_callers_stream
def flash_attn_varlen_func(q, k, v, max_seqlen_q, cu_seqlens_q, max_seqlen_k, cu_seqlens_k=None, seqused_k=None,
                           q_v=None, dropout_p=0.0, softmax_scale=None, causal=False, window_size=None, softcap=0.0,
                           alibi_slopes=None, deterministic=False, return_attn_probs=False, block_table=None,
                           return_softmax_lse=False, out=None, scheduler_metadata=None, q_descale=None,
                           k_descale=None, v_descale=None, num_splits=0, fa_version=None, s_aux=None,
                           cp_world_size=1, cp_rank=0, cp_tot_seqused_k=None, *, kv_cache_dtype=None, stream=None):
    """vLLM's flash_attn_varlen_func over a paged KV cache (k, v: the cache's K and V halves).

    Returns out [total_q, Hq, D], or (out, softmax_lse [Hq, total_q] float32, natural log) with
    return_softmax_lse. Without scheduler_metadata the step's schedule is made here (reading
    cu_seqlens_q and seqused_k on the host: a device wait on CUDA, refused under graph capture).
    With scheduler_metadata, causal must be the schedule's and deterministic=True needs a schedule
    made with it. fa_version None/2/3 picks the kernel generation where the backend has it.
    k_descale / v_descale are the FP8 cache's scales (scalar, [Hkv], or vLLM's [num_reqs, Hkv]
    broadcast); with a 16-bit cache they change nothing, as in FA3. An FP8 query (torch float8_e4m3fn, times
    q_descale: a scalar, [1] or [num_reqs, Hkv]) gives out's dtype (bfloat16 without out): over an e4m3 cache
    the FP8 tensor cores read it as it is where they serve the step (as FA3); other kernels read it dequantized
    (q times q_descale, rounded to out's dtype).
    cp_world_size > 1 (with cp_rank and cp_tot_seqused_k, as vLLM's FA3 fork takes them; CPU or CUDA arrays):
    k, v and seqused_k are rank cp_rank's share (position t on rank t % cp_world_size), the mask is causal
    at absolute positions, and the result is this rank's partial attention, to combine by its LSE.
    """
    if block_table is None:
        raise ValueError("block_table is None: k and v must be the paged KV cache "
                         "[num_blocks, block_size, num_kv_heads, head_size] (non-paged varlen is not supported)")
    if cu_seqlens_k is not None:
        raise ValueError("cu_seqlens_k: with a paged cache pass seqused_k (keys per request) instead")
    if seqused_k is None:
        raise ValueError("seqused_k is None (required: keys per request)")
    if dropout_p:
        raise ValueError("dropout_p = %r: only 0.0 (inference) is supported" % (dropout_p,))
    if return_attn_probs:
        raise ValueError("return_attn_probs is not supported")
    if q_v is not None:
        raise ValueError("q_v is not supported")
    cp_world_size, cp_rank = cp.check_ranks(cp_world_size, cp_rank, cp_tot_seqused_k)
    softmax_scale = check.positive_scale(softmax_scale, "softmax_scale", "1/sqrt(head_size)")
    softcap = check.soft_cap(softcap, "softcap", "0 = no cap")
    window = check.window(window_size)
    check.array(q, "q", rank=3)
    fp8_query = check.dtype_name(q.dtype) in check.FP8_DTYPES
    q_fp8 = q_scale = None
    if fp8_query:
        check.array(cu_seqlens_q, "cu_seqlens_q", rank=1, dtypes=check.INDEX_DTYPES)
        check.array(k, "k", rank=4, dtypes=check.FLOAT_DTYPES + check.FP8_DTYPES)
        dtype, q_scale = _fp8_query(q, q_descale, cu_seqlens_q, k.shape[2], out)
        if cp_world_size > 1:  # each query row becomes a request of its own: dequantized here
            q = _dequantized_query(q, q_scale, cu_seqlens_q, dtype, stream)
        else:
            # The checks and the layer see q in the dtype the layer computes in (a view without memory); the
            # forward reads the e4m3 values and q_scale (the FP8 tensor cores as they are; others dequantized).
            import torch
            q_fp8, q = q, torch.empty((), dtype=dtype, device=q.device).expand(q.shape)
    _check_attention_arrays(q, k, v, cu_seqlens_q, seqused_k, block_table, out)
    _check_constants(alibi_slopes, s_aux, q.shape[1])
    if cp_world_size > 1:
        cp.check_served(device_of(q), cp_world_size, window, alibi_slopes, s_aux)
        return _rank_partial(q, k, v, cu_seqlens_q, max_seqlen_k, seqused_k, softmax_scale, causal, softcap,
                             deterministic, block_table, return_softmax_lse, out, scheduler_metadata, k_descale,
                             v_descale, num_splits, fa_version, (cp_world_size, cp_rank, cp_tot_seqused_k),
                             kv_cache_dtype, stream)
    kv_format = layers.cache_format(q.dtype, k.dtype, kv_cache_dtype)
    if scheduler_metadata is None:
        scheduler_metadata = get_scheduler_metadata(
            seqused_k.shape[0], max_seqlen_q, max_seqlen_k, q.shape[1], k.shape[2], q.shape[2], seqused_k,
            qkv_dtype=q.dtype, cu_seqlens_q=cu_seqlens_q, page_size=k.shape[1], causal=causal,
            window_size=window, num_splits=num_splits, num_tokens=q.shape[0], deterministic=deterministic)
    step = schedules.find(scheduler_metadata, cu_seqlens_q, seqused_k)
    # The mask is the step's: a schedule made for the other one would win silently.
    if bool(causal) != step.causal:
        raise ValueError("causal=%s but the scheduler_metadata was built with causal=%s (pass the same causal "
                         "to get_scheduler_metadata)" % (bool(causal), step.causal))
    if deterministic and not step.deterministic:
        raise ValueError("deterministic=True but the scheduler_metadata was built with deterministic=False "
                         "(pass deterministic=True to get_scheduler_metadata)")
    layer_shape = (q.shape[1], k.shape[2], q.shape[2])
    if q.shape[0] < step.num_tokens or layer_shape != step.heads or k.shape[1] != step.page_size:
        raise ValueError("q %s / k %s do not fit the scheduler_metadata's step (%d tokens, heads %s, page_size %d)" % (
            list(q.shape), list(k.shape), step.num_tokens, step.heads, step.page_size))
    kind = schedules.layer_kind(check.dtype_name(q.dtype), kv_format, window, alibi_slopes is not None,
                               s_aux is not None, softcap)
    attn_metadata = step.metadata(block_table, kind)
    layers.check_num_splits(num_splits, step.num_splits)
    # FA3 runs an FP8 query over an e4m3 cache on the FP8 tensor cores: so do we where the kernel serves.
    fp8_tensor_cores = fp8_query and kv_format in ("fp8", "fp8_e4m3")
    layer = (q.dtype, k.dtype, kv_format, softmax_scale, causal, window, softcap, id(alibi_slopes), id(s_aux),
             fa_version, layers.layout_of(k), fp8_tensor_cores)
    entry = step.layers.get(layer)
    if entry is None:
        impl = layers.layer_impl(step.device, q, k, kv_format, softmax_scale, causal, window, softcap, alibi_slopes,
                                 s_aux, fa_version, fp8_tensor_cores)
        entry = step.layers[layer] = (impl, kv_format.startswith("fp8"), alibi_slopes, s_aux)
    impl, fp8 = entry[0], entry[1]
    if out is None:
        out = empty(q, q.shape)
    lse = empty(q, (q.shape[1], q.shape[0]), float32=True) if return_softmax_lse else None
    impl.forward_split(q if q_fp8 is None else q_fp8, k, v, attn_metadata, out, lse, k_descale if fp8 else None,
                       v_descale if fp8 else None, stream, q_scale=q_scale)
    return (out, lse) if return_softmax_lse else out


def _rank_partial(q, k, v, cu_seqlens_q, max_seqlen_k, seqused_k, softmax_scale, causal, softcap, deterministic,
                  block_table, return_softmax_lse, out, scheduler_metadata, k_descale, v_descale, num_splits,
                  fa_version, cp_args, kv_cache_dtype, stream):
    """flash_attn_varlen_func under context parallelism (_vllm_cp): this rank's partial attention, each query
    row a request of its own over the rank's keys it sees at absolute positions."""
    world, rank, totals = cp_args
    if scheduler_metadata is not None and bool(causal) != schedules.find(scheduler_metadata, cu_seqlens_q,
                                                                          seqused_k).causal:
        raise ValueError("causal=%s but the scheduler_metadata was built with causal=%s (pass the same causal "
                         "to get_scheduler_metadata)" % (bool(causal), not causal))
    rows = cp.Rows(cu_seqlens_q, seqused_k, totals, (world, rank), causal, q.shape[0], max_seqlen_k)

    def attend(q_rows, offsets, keys, max_keys, tables, out_rows):
        return flash_attn_varlen_func(q_rows, k, v, 1, offsets, max_keys, seqused_k=keys, softmax_scale=softmax_scale,
                                      causal=True, softcap=softcap, deterministic=deterministic, block_table=tables,
                                      return_softmax_lse=return_softmax_lse, out=out_rows, k_descale=k_descale,
                                      v_descale=v_descale, num_splits=num_splits, fa_version=fa_version,
                                      kv_cache_dtype=kv_cache_dtype, stream=stream)
    return cp.rank_partial(rows, q, block_table, out, return_softmax_lse, attend)


def cascade_attention(output, query, key_cache, value_cache, cu_query_lens, max_query_len, cu_prefix_query_lens,
                      prefix_kv_lens, suffix_kv_lens, max_kv_len, softmax_scale, alibi_slopes, sliding_window,
                      logits_soft_cap, block_table, common_prefix_len, max_num_splits=0, fa_version=None,
                      prefix_scheduler_metadata=None, suffix_scheduler_metadata=None, q_descale=None, k_descale=None,
                      v_descale=None, s_aux=None):
    """vLLM's cascade_attention (its FlashAttention backend): attention of every request over its whole
    sequence (the shared first common_prefix_len keys plus suffix_kv_lens of its own) into output.

    It runs as one step with the library's cascade (the prefix once for every query, non-causal and
    with the sinks; the suffixes causal; merged by LSE), which builds its own schedule: vLLM's
    prefix_scheduler_metadata / suffix_scheduler_metadata (FA3's, for its two calls) are not needed.
    Like vLLM, refused with ALiBi or a sliding window."""
    if alibi_slopes is not None:
        raise ValueError("alibi_slopes: cascade attention does not support ALiBi (as in vLLM)")
    if check.window(sliding_window, "sliding_window") != (-1, -1):
        raise ValueError("sliding_window = %r: cascade attention does not support a window (as in vLLM)" %
                         (sliding_window,))
    check.array(key_cache, "key_cache", rank=4)
    check.array(query, "query", rank=3)
    check.array(cu_prefix_query_lens, "cu_prefix_query_lens", rank=1, dtypes=check.INDEX_DTYPES, shape=(2,),
                why="[0, num_tokens]: every query token reads the prefix")
    check.array(prefix_kv_lens, "prefix_kv_lens", rank=1, dtypes=check.INDEX_DTYPES, shape=(1,),
                why="[common_prefix_len]")
    check.array(suffix_kv_lens, "suffix_kv_lens", rank=1, dtypes=check.INDEX_DTYPES)
    block_size = key_cache.shape[1]
    common_prefix_len = check.integer(common_prefix_len, "common_prefix_len", low=1,
                                      allowed="a positive multiple of block_size")
    if common_prefix_len % block_size:
        raise ValueError("common_prefix_len = %d (allowed: a positive multiple of block_size %d)" % (
            common_prefix_len, block_size))
    seq_lens = suffix_kv_lens + common_prefix_len
    schedule = get_scheduler_metadata(
        suffix_kv_lens.shape[0], max_query_len, max_kv_len, query.shape[1], key_cache.shape[2], query.shape[2],
        seq_lens, qkv_dtype=query.dtype, cu_seqlens_q=cu_query_lens, page_size=block_size, causal=True,
        num_splits=max_num_splits, num_tokens=query.shape[0], common_prefix_len=common_prefix_len)
    return flash_attn_varlen_func(
        query, key_cache, value_cache, max_query_len, cu_query_lens, max_kv_len, seqused_k=seq_lens,
        softmax_scale=softmax_scale, causal=True, softcap=logits_soft_cap, block_table=block_table, out=output,
        scheduler_metadata=schedule, q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
        num_splits=max_num_splits, fa_version=fa_version, s_aux=s_aux)


@on_callers_stream
def reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype="auto", k_scale=None,
                            v_scale=None, *, stream=None):
    """vLLM's reshape_and_cache_flash: copies key/value [num_tokens, Hkv, D] into the paged cache
    [num_blocks, block_size, Hkv, D] at slot_mapping [num_tokens] int64 (-1 skipped); an FP8 cache
    (float8 or uint8) stores saturate(x / scale) and needs k_scale and v_scale (vLLM passes them)."""
    write_kv_cache(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale, v_scale, stream)


@on_callers_stream
def merge_attn_states(output, prefix_output, prefix_lse, suffix_output, suffix_lse, output_lse=None,
                      prefill_tokens_with_context=None, *, stream=None):
    """vLLM's merge_attn_states: output [T, H, D] from two partial results and their LSEs [H, T]."""
    for name, value in (("output", output), ("prefix_output", prefix_output), ("suffix_output", suffix_output)):
        check.array(value, name, rank=3, dtypes=check.FLOAT_DTYPES, shape=output.shape if name != "output" else None,
                    why="output's shape")
    for name, value in (("prefix_lse", prefix_lse), ("suffix_lse", suffix_lse), ("output_lse", output_lse)):
        if value is not None or name != "output_lse":
            check.array(value, name, rank=2, dtypes=("float32",), shape=(output.shape[1], output.shape[0]),
                        why="[num_heads, num_tokens] of output")
    _C.merge_attn_states(output, prefix_output, prefix_lse, suffix_output, suffix_lse, output_lse,
                         prefill_tokens_with_context, stream)
