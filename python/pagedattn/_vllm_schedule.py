"""The schedule of one step, as get_scheduler_metadata returns it: an int32 array [TAG, step id] that
vLLM's builder may copy into a persistent buffer (it zeroes the rest). The id names a Step held here:
the step's host lengths and configuration, and the metadata built from them for each block table and
kind of layer (built at the first layer's call, or at once when get_scheduler_metadata has the table).

Host arrays are read for their id. A CUDA array is not read (that would wait for the device, and is
not allowed under graph capture): its step is the newest one built over the call's cu_seqlens_q and
seqused_k, which is the one vLLM's builder made for this step."""
from collections import OrderedDict, namedtuple

import numpy as np

from . import _C
from . import _vllm_layers as layers
from ._arrays import device_of, from_host, order_after_build, step_slots

TAG = 0x50414731  # 'PAG1': a pagedattn schedule
_HELD = 256  # steps held: a step's schedule is used by the layers of that step, then dropped
_steps = OrderedDict()
_newest = {}  # (device, cu_seqlens_q pointer, seqused_k pointer) -> newest step id over them
_next_id = [1]


def pointer(array):
    """The array's data address (PyTorch, NumPy, CuPy), or None."""
    if hasattr(array, "data_ptr"):
        return array.data_ptr()
    if hasattr(array, "__array_interface__"):
        return array.__array_interface__["data"][0]
    data = getattr(array, "data", None)
    return getattr(data, "ptr", None)


class Step:
    """One step's lengths and configuration, and its built metadata per block table and layer kind."""

    def __init__(self, device, arrays, hosts, num_tokens, max_lens, heads, page_size, causal, num_splits,
                 deterministic, common_prefix_len, for_capture):
        self.device, self.arrays, self.hosts = device, arrays, hosts  # (cu_seqlens_q, cache_seqlens) and copies
        self.batch_size, self.num_tokens, self.max_lens = len(hosts[1]), num_tokens, max_lens
        self.heads, self.page_size = heads, page_size  # (num_heads_q, num_heads_kv, headdim)
        self.causal, self.num_splits, self.deterministic = bool(causal), num_splits, bool(deterministic)
        self.common_prefix_len, self.for_capture = common_prefix_len, for_capture
        self.backend = None  # the backend's name, once the step is built
        self.layers = {}  # per layer configuration: (impl, whether the cache is FP8, its model constants)
        self._built = {}  # (block_table address, shape, layer kind) -> (AttentionMetadata, block_table)

    def metadata(self, block_table, kind):
        """The step's metadata over `block_table` for layers of `kind` (layer_kind()), built once."""
        key = (pointer(block_table) or id(block_table), tuple(block_table.shape), kind)
        entry = self._built.get(key)
        if entry is None:  # the table stays referenced, so that its address is not reused by another
            entry = self._built[key] = (self._build(block_table, kind), block_table)
        return entry[0]

    def _build(self, block_table, kind):
        hq, hkv, d = self.heads
        selection = layers.select(d, hq, hkv, kind.dtype, kind.kv_format, self.page_size, self.device,
                                  has_sinks=kind.has_sinks, use_alibi=kind.use_alibi,
                                  use_sliding_window=kind.window != (-1, -1), use_soft_cap=kind.soft_cap,
                                  causal=self.causal)
        self.backend = selection.backend.name
        layers.check_deterministic(self.deterministic, self.backend, self.common_prefix_len)
        builder = layers.step_builder(selection.backend, hq, hkv, d, self.page_size, kind.dtype, kind.kv_format,
                                      self.device, kind.window, self.deterministic, self.num_splits, kind.use_alibi,
                                      self.batch_size,
                                      self.num_tokens, self.max_lens[1])
        qsl, seq_lens = self.arrays
        meta = _C.CommonAttentionMetadata(
            query_start_loc=qsl, query_start_loc_cpu=self.hosts[0], seq_lens=seq_lens, seq_lens_cpu=self.hosts[1],
            block_table_tensor=block_table,
            slot_mapping=step_slots(self.hosts[0], self.hosts[1], block_table, self.page_size, self.num_tokens),
            num_reqs=self.batch_size, num_actual_tokens=self.num_tokens, max_query_len=self.max_lens[0],
            max_seq_len=self.max_lens[1], causal=self.causal)
        if self.for_capture:
            if self.common_prefix_len:
                raise ValueError("common_prefix_len = %d: cascade is not captured in CUDA graphs" %
                                 self.common_prefix_len)
            built = builder.build_for_cudagraph_capture(meta)
        else:
            built = builder.build(self.common_prefix_len, meta)
        order_after_build(self.device, qsl)
        return built

    def built(self):
        """The metadata built so far (one per block table and layer kind)."""
        return [entry[0] for entry in self._built.values()]

    def check_arrays(self, cu_seqlens_q, seqused_k):
        """ValueError unless the call passes the arrays the schedule was made over (by address)."""
        for name, given, built in zip(("cu_seqlens_q", "seqused_k"), (cu_seqlens_q, seqused_k), self.arrays):
            if given is not built and pointer(given) != pointer(built):
                raise ValueError("%s is not the array scheduler_metadata was made over (at %#x; made over the "
                                 "one at %#x)" % (name, pointer(given) or 0, pointer(built) or 0))


# What a step's builder depends on in a layer (a model may mix windows, ALiBi, sinks across layers).
_LayerKind = namedtuple("LayerKind", "dtype kv_format window use_alibi has_sinks soft_cap")


def layer_kind(dtype, kv_format, window, use_alibi, has_sinks, soft_cap):
    """The LayerKind of a layer (flags as bools: a cap of 50.0 and has_softcap=True are one kind)."""
    return _LayerKind(dtype, kv_format, tuple(window), bool(use_alibi), bool(has_sinks), bool(soft_cap))


def hold(step):
    """Registers `step`; returns its schedule array [TAG, id] on the device of its cu_seqlens_q."""
    step_id = _next_id[0]
    _next_id[0] = step_id % (2 ** 31 - 1) + 1
    _steps[step_id] = step
    while len(_steps) > _HELD:
        _steps.popitem(last=False)
    qsl, seq_lens = step.arrays
    _newest[(step.device, pointer(qsl), pointer(seq_lens))] = step_id
    return from_host(qsl, np.array([TAG, step_id], np.int32))


def find(schedule, cu_seqlens_q, seqused_k):
    """The Step a schedule array names (see the module's docstring for CUDA arrays)."""
    if not (hasattr(schedule, "shape") and hasattr(schedule, "__dlpack_device__")):
        raise ValueError("scheduler_metadata is %s (expected the array get_scheduler_metadata returned, or a "
                         "copy of it)" % type(schedule).__name__)
    if len(schedule.shape) != 1 or schedule.shape[0] < 2:
        raise ValueError("scheduler_metadata has shape %s (expected [2] or longer: get_scheduler_metadata's "
                         "array)" % (list(schedule.shape),))
    device = device_of(schedule)
    if device == "cpu":
        tag, step_id = (int(x) for x in schedule[:2].tolist())
        if tag != TAG:
            raise ValueError("scheduler_metadata does not hold a pagedattn schedule (first entry %d; pass what "
                             "pagedattn's get_scheduler_metadata returned)" % tag)
    else:
        step_id = _newest.get((device, pointer(cu_seqlens_q), pointer(seqused_k)))
        if step_id is None:
            raise ValueError("scheduler_metadata: no get_scheduler_metadata call was made over this "
                             "cu_seqlens_q and seqused_k on %s" % device)
    step = _steps.get(step_id)
    if step is None:
        raise ValueError("scheduler_metadata names step %d, which is no longer held (the newest %d steps are): "
                         "call get_scheduler_metadata for this step" % (step_id, _HELD))
    step.check_arrays(cu_seqlens_q, seqused_k)
    return step
