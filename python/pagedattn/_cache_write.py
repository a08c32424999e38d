"""reshape_and_cache_flash as the copy it is: the new tokens' keys and values into their cache slots.

The library's cache update runs it wherever a backend takes the cache's block size and dtypes (on the
CPU: any block size, f32/f16/bf16 sources, FP8 caches). Where none does (a GPU cache with a block size
that is not a multiple of 16, or a float32 model) a PyTorch scatter does the same copy for 16-bit and
float32 caches; FP8 ones need the library's encoding there and are refused."""
import sys

from . import _checks as check
from . import _vllm_layers as layers
from ._arrays import device_key, device_of, framework

_writers = {}  # (device, dtypes, heads, head size, block size, format, layout) -> (impl, None) or (None, why)


def write_kv_cache(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale, v_scale, stream):
    check.array(key, "key", rank=3, dtypes=check.FLOAT_DTYPES)
    check.array(value, "value", shape=key.shape, dtypes=(check.dtype_name(key.dtype),), why="key's shape and dtype")
    check.array(key_cache, "key_cache", rank=4, dtypes=check.FLOAT_DTYPES + check.FP8_DTYPES)
    check.array(value_cache, "value_cache", shape=key_cache.shape, dtypes=(check.dtype_name(key_cache.dtype),),
                why="key_cache's shape and dtype")
    if tuple(key.shape[1:]) != tuple(key_cache.shape[2:]):
        raise ValueError("key is %s but key_cache holds [num_kv_heads, head_size] = %s per token" % (
            list(key.shape), list(key_cache.shape[2:])))
    check.array(slot_mapping, "slot_mapping", rank=1, dtypes=check.INDEX_DTYPES)
    tokens = slot_mapping.shape[0]
    if tokens > key.shape[0]:
        raise ValueError("slot_mapping has %d slots but key has %d tokens" % (tokens, key.shape[0]))
    if tokens < key.shape[0]:  # vLLM pads key/value for CUDA graphs; slot_mapping counts the real tokens
        key, value = key[:tokens], value[:tokens]
    kv_format = layers.cache_format(key.dtype, key_cache.dtype, kv_cache_dtype)
    fp8 = kv_format.startswith("fp8")
    if fp8 and (k_scale is None or v_scale is None):
        raise ValueError("kv_cache_dtype = %r (an FP8 cache) needs k_scale and v_scale (vLLM passes the layer's "
                         "_k_scale / _v_scale, 1.0 when uncalibrated); got k_scale %s, v_scale %s" % (
                             kv_format, "None" if k_scale is None else "given", "None" if v_scale is None else "given"))
    impl, refusal = _writer(key, key_cache, kv_format)
    if impl is not None:
        impl.do_kv_cache_update_split(key, value, key_cache, value_cache, slot_mapping, k_scale if fp8 else None,
                                      v_scale if fp8 else None, stream)
    elif fp8 or framework(key) != "torch":
        raise ValueError("reshape_and_cache_flash: no backend here writes a %s cache of block size %d from %s "
                         "(%s)" % (kv_format, key_cache.shape[1], check.dtype_name(key.dtype), refusal))
    else:
        torch_scatter(key, value, key_cache, value_cache, slot_mapping)


def _writer(key, key_cache, kv_format):
    """(the impl whose cache update writes this cache, None) or (None, why no backend here takes it)."""
    layout = layers.layout_of(key_cache)
    num_kv_heads, head_size, block_size = key.shape[1], key.shape[2], key_cache.shape[1]
    dtype, device = check.dtype_name(key.dtype), device_of(key)
    cache_key = (device_key(key), dtype, key_cache.dtype, num_kv_heads, head_size, block_size, kv_format, layout)
    if cache_key not in _writers:
        try:
            selection = layers.select(head_size, num_kv_heads, num_kv_heads, dtype, kv_format, block_size, device)
        except ValueError as e:
            _writers[cache_key] = (None, str(e))
        else:
            _writers[cache_key] = (selection.backend.make_impl(
                num_heads=num_kv_heads, head_size=head_size, num_kv_heads=num_kv_heads, dtype=dtype,
                kv_cache_dtype=kv_format, kv_layout=layout, device=device), None)
    return _writers[cache_key]


def torch_scatter(key, value, key_cache, value_cache, slot_mapping):
    """The same copy in PyTorch ops, queued on the current stream: cache[slot // bs, slot % bs] = x for
    every slot >= 0 (converted to the cache's dtype)."""
    torch = sys.modules["torch"]
    block_size = key_cache.shape[1]
    slots = slot_mapping.to(torch.int64)
    real = (slots >= 0).nonzero().squeeze(1)
    slots = slots.index_select(0, real)
    blocks, offsets = slots // block_size, slots % block_size
    key_cache.index_put_((blocks, offsets), key.index_select(0, real).to(key_cache.dtype))
    value_cache.index_put_((blocks, offsets), value.index_select(0, real).to(value_cache.dtype))
