"""The machinery behind the FlashInfer-style wrappers: a backend bound to the workspace's device, a
plan() that turns FlashInfer's page table into the step's metadata (once per step), and a run() that
only converts the arrays and queues the kernel.

Under use_cuda_graph the step's arrays are allocated once, at the first plan, and each later plan
writes them in place (and builds for capture), so a run captured in a CUDA graph replays the newest
plan; FlashInfer's fixed page-table buffers are written as FlashInfer writes them."""
import math
import numbers

import numpy as np

from . import _C
from . import _checks as check
from . import _vllm_layers as layers
from ._arrays import device_of, empty, framework, from_host, order_after_build, permuted, scale_in_place, step_slots
from ._arrays import on_callers_stream, store_host, store_transposed, to_host
from . import _fi_rope as rope_mod
from ._fi_blocks import BLOCK, BlockGather

LN2 = math.log(2.0)
# FlashInfer's own kernel choices: "auto" binds the best backend here, "fa2" / "fa3" FLASHINFER with that
# kernel generation; its other backends (trtllm-gen, cudnn, cutlass) are not ours.
_FLASHINFER_GENERATIONS = {"fa2": 2, "fa3": 3}
_FLASHINFER_NAMES = ("auto", "fa2", "fa3")


def host_ints(array, name):
    check.array(array, name, rank=1, dtypes=check.INDEX_DTYPES)
    return np.asarray(to_host(array)).astype(np.int64)


def host_scale(value, name):
    """A FlashInfer scale (a positive float, or a 0-d / 1-element array of one) as a host float; None stays None."""
    if value is None:
        return None
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        scale = float(value)
    else:
        check.array(value, name)
        flat = (np.asarray(to_host(value)).reshape(-1) if framework(value) != "torch"
                else value.detach().reshape(-1).cpu())
        if flat.shape[0] != 1:
            raise ValueError("%s has %d elements (allowed with a 16-bit cache: a float or a 0-d / 1-element array, "
                             "as FlashInfer takes)" % (name, flat.shape[0]))
        scale = float(flat[0])
    if not 0 < scale < float("inf"):
        raise ValueError("%s = %r (allowed: a positive scale)" % (name, scale))
    return scale


def bind_backend(backend, device):
    """Our backend for FlashInfer's `backend` keyword (or one of ours by name) on `device`: (backend, generation)."""
    if backend == "auto":
        for name in ["FLASHINFER"] + list(_C.backend_priority(device)):
            found = _C.find_backend(name)
            if not found.unavailable_reason() and found.supports_device(device):
                return found, 0
        raise ValueError("backend = 'auto': no backend serves %s" % device)
    name = "flashinfer" if backend in _FLASHINFER_GENERATIONS else backend
    found = _C.find_backend(name) if isinstance(name, str) else None
    if found is None:
        raise ValueError("backend = %r is unknown (allowed: %s, or ours: %s)" % (
            backend, ", ".join(repr(n) for n in _FLASHINFER_NAMES),
            ", ".join(repr(b.name.lower()) for b in _C.registered_backends())))
    if found.unavailable_reason():
        raise ValueError("backend %r (%s): %s" % (backend, found.name, found.unavailable_reason()))
    if not found.supports_device(device):
        raise ValueError("backend %r (%s) does not run on %s, where the workspace is (allowed there: 'auto', or a "
                         "backend of that device)" % (backend, found.name, device))
    return found, _FLASHINFER_GENERATIONS.get(backend, 0)


class PagedWrapper:
    """What the paged wrappers share: the binding, plan() and run()."""

    def _setup(self, float_workspace_buffer, kv_layout, use_cuda_graph, fixed, backend):
        check.array(float_workspace_buffer, "float_workspace_buffer")
        if kv_layout not in ("NHD", "HND"):
            raise ValueError("kv_layout = %r (allowed: 'NHD', 'HND')" % (kv_layout,))
        self._device = device_of(float_workspace_buffer)
        self._backend, self._generation = bind_backend(backend, self._device)
        self._layout = kv_layout
        self._workspace = float_workspace_buffer  # the device and framework to plan for
        self._graph = bool(use_cuda_graph)
        self._fixed = fixed  # FlashInfer's fixed page-table buffers {name: array} (use_cuda_graph)
        self._fixed_batch = None
        if self._graph:
            for name, value in fixed.items():
                if value is None:
                    raise ValueError("%s_buffer is None: use_cuda_graph=True needs FlashInfer's fixed buffers" % name)
                check.array(value, name + "_buffer", rank=1, dtypes=("int32",))
            self._fixed_batch = fixed["paged_kv_last_page_len"].shape[0]
            if fixed["paged_kv_indptr"].shape[0] != self._fixed_batch + 1:
                raise ValueError("paged_kv_indptr_buffer has %d entries; paged_kv_last_page_len_buffer's %d requests "
                                 "need %d" % (fixed["paged_kv_indptr"].shape[0], self._fixed_batch,
                                              self._fixed_batch + 1))
        self._fixed_pages = fixed["paged_kv_indices"].shape[0] if self._graph else None
        self._gather = BlockGather(float_workspace_buffer, self._graph, self._fixed_pages, self._fixed_batch)
        self._builders, self._impls, self._scales = {}, {}, {}
        self._persistent = None  # the step's arrays under use_cuda_graph, written in place by each plan
        self._q_positions = None  # the queries' RoPE positions under use_cuda_graph
        self._step = None

    @property
    def is_cuda_graph_enabled(self):
        return self._graph

    def _plan(self, qo_indptr, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
              causal, pos_encoding_mode, window_left, logits_soft_cap, sm_scale, q_data_type, kv_data_type,
              rope_theta=None, rope_scale=None, names=("indptr", "indices", "last_page_len")):
        """The step for FlashInfer's page table; `names` are the caller's names of its three arrays."""
        rope = rope_mod.mode(pos_encoding_mode) == "ROPE_LLAMA"
        if rope:
            rope_mod.torch_of(self._workspace)
        rotation = rope_mod.Rotation(rope_mod.constant(rope_theta, "rope_theta", rope_mod.DEFAULT_THETA),
                                     rope_mod.constant(rope_scale, "rope_scale", rope_mod.DEFAULT_SCALE))
        heads = tuple(check.integer(v, n, low=1) for v, n in ((num_qo_heads, "num_qo_heads"),
                                                              (num_kv_heads, "num_kv_heads"), (head_dim, "head_dim")))
        if heads[0] % heads[1]:
            raise ValueError("num_qo_heads = %d is not a multiple of num_kv_heads = %d" % heads[:2])
        page_size = check.integer(page_size, "page_size", low=1)
        window_left = check.integer(window_left, "window_left", low=-1, allowed="-1 = unbounded, or >= 0")
        sm_scale = check.positive_scale(sm_scale, "sm_scale", "1/sqrt(head_dim)")
        softcap = check.soft_cap(logits_soft_cap, "logits_soft_cap", "None or 0 = no cap") or None
        q_dtype = check.float_dtype(q_data_type, "q_data_type", "; FP8 queries are not supported by the C++ API yet")
        kv_format = layers.cache_format(q_dtype, q_dtype if kv_data_type is None else kv_data_type, None)
        if rope and kv_format.startswith("fp8"):
            raise ValueError("pos_encoding_mode = 'ROPE_LLAMA' with an FP8 cache (%s): the drop-in turns the keys "
                             "before our kernels read them, and FP8 keys would lose precision re-quantized (allowed "
                             "with ROPE_LLAMA: a 16-bit or float32 cache)" % kv_format)
        starts, flat, kv_lens = self._page_table(indptr, indices, last_page_len, page_size, names)
        qsl = check.offsets(host_ints(qo_indptr, "qo_indptr"), "qo_indptr", len(kv_lens))
        q_positions = rope_mod.query_positions(qsl, kv_lens) if rope else None
        qsl, seq_lens, rows = _split_long_queries(qsl, kv_lens, causal)
        # Pages the kernels cannot take, or keys RoPE must turn, are gathered into 16-token blocks.
        gathered = rope or not self._backend.supports_block_size(page_size)
        if gathered:
            block_size, table = BLOCK, self._gather.plan(starts, flat, kv_lens, page_size, rows)
        else:
            block_size, table = page_size, _page_rows(starts, flat, rows)
        window = (window_left, 0 if causal else -1) if window_left >= 0 else (-1, -1)
        builder, kv_dtype = self._builder(heads, block_size, causal, window, softcap, q_dtype, kv_data_type, len(rows),
                                          int(qsl[-1]), int(seq_lens.max(initial=0)))
        self._check_order(builder, np.diff(qsl))
        arrays = self._step_arrays(qsl.astype(np.int32), seq_lens.astype(np.int32), table,
                                   -(-self._fixed_pages * page_size // block_size) + 1 if self._graph else 0)
        meta = _C.CommonAttentionMetadata(
            query_start_loc=arrays[0], query_start_loc_cpu=qsl.astype(np.int32), seq_lens=arrays[1],
            seq_lens_cpu=seq_lens.astype(np.int32), block_table_tensor=arrays[2],
            slot_mapping=step_slots(qsl, seq_lens, table, block_size, int(qsl[-1])), num_reqs=len(rows),
            num_actual_tokens=int(qsl[-1]), max_query_len=int(np.diff(qsl).max(initial=0)),
            max_seq_len=int(seq_lens.max(initial=0)), causal=causal)
        metadata = builder.build_for_cudagraph_capture(meta) if self._graph else builder.build(0, meta)
        order_after_build(self._device, self._workspace)
        self._write_fixed(dict(qo_indptr=qo_indptr, paged_kv_indptr=indptr, paged_kv_indices=indices,
                               paged_kv_last_page_len=last_page_len))
        self._step = dict(metadata=metadata, meta=meta, heads=heads, kv_dtype=kv_dtype, q_dtype=q_dtype,
                          scale=sm_scale, window=window, window_left=window_left, softcap=softcap, tokens=int(qsl[-1]),
                          page_size=page_size, gathered=gathered, layout="NHD" if gathered else self._layout,
                          rotation=rotation if rope else None, q_positions=self._positions(q_positions),
                          last_page=int(flat[:starts[-1]].max(initial=-1)))

    def _page_table(self, indptr, indices, last_page_len, page_size, names):
        """FlashInfer's page table read on the host: (indptr, indices, keys per request), checked."""
        last = host_ints(last_page_len, names[2])
        batch = last.shape[0]
        if self._graph and batch != self._fixed_batch:
            raise ValueError("the plan has %d requests; under use_cuda_graph the batch is fixed at %d (the fixed "
                             "buffers' size)" % (batch, self._fixed_batch))
        starts = check.offsets(host_ints(indptr, names[0]), names[0], batch)
        flat = host_ints(indices, names[1])
        if flat.shape[0] < starts[-1]:
            raise ValueError("%s has %d entries; %s[-1] = %d pages" % (names[1], flat.shape[0], names[0], starts[-1]))
        if (flat[:starts[-1]] < 0).any():
            at = int(np.argmax(flat[:starts[-1]] < 0))
            raise ValueError("%s[%d] = %d (allowed: page ids >= 0)" % (names[1], at, flat[at]))
        pages = np.diff(starts)
        bad = (pages > 0) & ((last < 1) | (last > page_size))
        if bad.any():
            r = int(bad.argmax())
            raise ValueError("%s[%d] = %d (allowed: 1 to page_size = %d for a request with pages)" % (
                names[2], r, last[r], page_size))
        return starts, flat, np.where(pages > 0, (pages - 1) * page_size + last, 0)

    def _positions(self, host):
        """The queries' RoPE positions on the device (under use_cuda_graph in one array, rewritten in place)."""
        if host is None:
            return None
        if not self._graph:
            return from_host(self._workspace, host.astype(np.int64))
        if self._q_positions is None or self._q_positions.shape[0] < len(host):
            if self._q_positions is not None:
                raise ValueError("the plan has %d query tokens; the CUDA-graph buffers hold %d (sized at the first "
                                 "plan)" % (len(host), self._q_positions.shape[0]))
            self._q_positions = from_host(self._workspace, np.zeros(max(len(host), 8192), np.int64))
        store_host(self._q_positions[:len(host)], host.astype(np.int64))
        return self._q_positions

    def _check_order(self, builder, query_lens):
        threshold = builder.reorder_batch_threshold()
        if threshold is not None and len(query_lens):
            decode = query_lens <= threshold
            first_prefill = int(np.argmax(~decode)) if (~decode).any() else len(decode)
            if decode[first_prefill:].any():
                raise ValueError("%s needs requests with qo_len <= %d first: reorder the batch "
                                 "(reorder_batch_to_split_decodes_and_prefills)" % (self._backend.name, threshold))

    def _step_arrays(self, qsl, seq_lens, table, columns):
        """The step's device arrays: fresh ones, or under use_cuda_graph the persistent ones written in place
        (`columns`: the table width the fixed buffers can need)."""
        like = self._workspace
        if not self._graph:
            return from_host(like, qsl), from_host(like, seq_lens), from_host(like, table)
        if self._persistent is None:
            capacity = (self._fixed_batch + 1, max(table.shape[1], columns))
            self._persistent = (from_host(like, np.zeros(capacity[0], np.int32)),
                                from_host(like, np.zeros(capacity[0] - 1, np.int32)),
                                from_host(like, np.zeros((capacity[0] - 1, capacity[1]), np.int32)))
        qsl_buf, seq_buf, table_buf = self._persistent
        if len(seq_lens) > seq_buf.shape[0] or table.shape[1] > table_buf.shape[1]:
            raise ValueError("the plan needs %d requests of up to %d pages; the CUDA-graph buffers hold %d of %d" % (
                len(seq_lens), table.shape[1], seq_buf.shape[0], table_buf.shape[1]))
        n = len(seq_lens)
        store_host(qsl_buf[:n + 1], qsl)
        store_host(seq_buf[:n], seq_lens)
        store_host(table_buf[:n, :table.shape[1]], table)
        return qsl_buf[:n + 1], seq_buf[:n], table_buf[:n, :table.shape[1]]

    def _write_fixed(self, values):
        """FlashInfer copies the step's table into its fixed buffers under use_cuda_graph: so do we."""
        if not self._graph:
            return
        for name, buffer in self._fixed.items():
            value = values[name]
            host = np.asarray(to_host(value)).astype(np.int32)
            if host.shape[0] > buffer.shape[0]:
                raise ValueError("%s has %d entries; the fixed %s_buffer holds %d" % (
                    name, host.shape[0], name, buffer.shape[0]))
            if buffer is not value:
                store_host(buffer[:host.shape[0]], host)

    def _builder(self, heads, page_size, causal, window, softcap, q_dtype, kv_dtype, num_reqs, num_tokens, max_seq_len):
        hq, hkv, d = heads
        kv = layers.cache_format(q_dtype, q_dtype if kv_dtype is None else kv_dtype, None)
        _C.select_backend(head_size=d, num_heads=hq, num_kv_heads=hkv, dtype=q_dtype, kv_cache_dtype=kv,
                          block_size=page_size, use_sliding_window=window != (-1, -1), use_soft_cap=bool(softcap),
                          causal=causal, device=self._device, backend=self._backend.name)
        key = (hq, hkv, d, page_size, q_dtype, kv, window)  # the mask is the step's, not the builder's
        entry = self._builders.get(key)
        if entry is None or any(have < need for have, need in zip(entry[1], (num_reqs, num_tokens, max_seq_len))):
            if entry is not None and self._graph:
                raise ValueError("the plan outgrows the buffers the CUDA graph was captured with (%d requests, %d "
                                 "tokens, %d keys; captured with %s)" % (num_reqs, num_tokens, max_seq_len, entry[1]))
            limits = (max(256, num_reqs), max(8192, num_tokens), max(32768, max_seq_len))
            builder = self._backend.make_builder(
                num_heads=hq, num_kv_heads=hkv, head_size=d, block_size=page_size, dtype=q_dtype, kv_cache_dtype=kv,
                device=self._device, max_num_reqs=limits[0], max_num_tokens=limits[1],
                max_model_len=limits[2], sliding_window=window)
            entry = self._builders[key] = (builder, limits)
        return entry[0], kv

    def _impl(self, step, sinks, scale):
        key = (step["heads"], step["kv_dtype"], step["q_dtype"], scale, step["window"], step["softcap"], id(sinks),
               step["layout"])
        entry = self._impls.get(key)
        if entry is None:
            hq, hkv, d = step["heads"]
            impl = self._backend.make_impl(
                num_heads=hq, head_size=d, num_kv_heads=hkv, scale=scale, dtype=step["q_dtype"],
                sliding_window=step["window"], kv_cache_dtype=step["kv_dtype"], logits_soft_cap=step["softcap"],
                sinks=layers.host_floats(sinks), kv_layout=step["layout"], device=self._device,
                kernel_generation=self._generation)
            entry = self._impls[key] = (impl, sinks)
        return entry[0]

    def _scale(self, value, name):
        """An FP8 cache's k/v scale as the library takes it: arrays as given, floats (None = 1.0, as in
        FlashInfer) as a cached [1] array."""
        if hasattr(value, "__dlpack__"):
            return value
        value = 1.0 if value is None else host_scale(value, name)
        if value not in self._scales:
            self._scales[value] = from_host(self._workspace, np.array([value], np.float32))
        return self._scales[value]

    def _check_run(self, q, paged_kv_cache, out, lse, window_left):
        step = self._step
        if step is None:
            raise ValueError("run() before plan()")
        hq, hkv, d = step["heads"]
        check.array(q, "q", rank=3, dtypes=(step["q_dtype"],), shape=(step["tokens"], hq, d),
                    why="the planned tokens, num_qo_heads and head_dim, of q_data_type")
        if out is not None:
            check.array(out, "out", dtypes=(step["q_dtype"],), shape=q.shape, why="q's shape and dtype")
        if lse is not None:
            check.array(lse, "lse", dtypes=("float32",), shape=q.shape[:2], why="[q tokens, num_qo_heads]")
        if window_left is not None and window_left != step["window_left"]:
            raise ValueError("window_left = %r at run(); the plan has %d (plan again for another window)" % (
                window_left, step["window_left"]))
        halves = paged_kv_cache if isinstance(paged_kv_cache, (tuple, list)) else None
        if halves is not None and len(halves) != 2:
            raise ValueError("paged_kv_cache is a sequence of %d arrays (expected the (K, V) pair)" % len(halves))
        caches = halves if halves is not None else (paged_kv_cache,)
        for name, cache in zip(("paged_kv_cache[0]", "paged_kv_cache[1]") if halves else ("paged_kv_cache",), caches):
            check.array(cache, name, rank=4 if halves else 5, dtypes=check.FLOAT_DTYPES + check.FP8_DTYPES)
            shape = cache.shape[-4:] if halves is None else (None,) + tuple(cache.shape[1:])
            size = (step["page_size"], hkv) if self._layout == "NHD" else (hkv, step["page_size"])
            if tuple(shape[-3:-1]) != size or shape[-1] != d:
                raise ValueError("%s is %s (expected %s pages [.., %s, %d, %d])" % (
                    name, list(cache.shape), self._layout, *size, d))
            if step["last_page"] >= cache.shape[0]:
                raise ValueError("%s has %d pages; the plan's page table reads page %d" % (
                    name, cache.shape[0], step["last_page"]))
        if halves is None and paged_kv_cache.shape[1] != 2:
            raise ValueError("paged_kv_cache is %s (expected [pages, 2, ...]: K and V)" % list(paged_kv_cache.shape))
        return step

    @on_callers_stream
    def run(self, q, paged_kv_cache, *, q_scale=None, k_scale=None, v_scale=None, out=None, lse=None,
            return_lse=False, enable_pdl=None, window_left=None, sinks=None, stream=None):
        """Attention of q [total_q, Hq, D] over the paged cache for the planned step: out, or
        (out, lse [total_q, Hq] float32, base 2 as FlashInfer returns it) with return_lse. q_scale and
        k_scale fold into sm_scale, v_scale scales the output (FlashInfer's rule on every cache dtype;
        an FP8 cache's k_scale / v_scale may also be [Hkv] arrays, applied as it is read)."""
        step = self._check_run(q, paged_kv_cache, out, lse, window_left)
        scale, v_factor = step["scale"], None
        q_factor = host_scale(q_scale, "q_scale")
        if step["kv_dtype"].startswith("fp8"):
            scales, k_factor = (self._scale(k_scale, "k_scale"), self._scale(v_scale, "v_scale")), None
        else:
            scales, k_factor, v_factor = (None, None), host_scale(k_scale, "k_scale"), host_scale(v_scale, "v_scale")
        for factor in (q_factor, k_factor):
            if factor is not None:
                scale = (1.0 / math.sqrt(step["heads"][2]) if scale is None else scale) * factor
        if sinks is not None:
            check.array(sinks, "sinks", rank=1, shape=(step["heads"][0],), why="one per query head")
        impl = self._impl(step, sinks, scale)
        if out is None:
            out = empty(q, q.shape)
        lse_rows = empty(q, (q.shape[1], q.shape[0]), float32=True) if return_lse else None
        if step["rotation"] is not None:
            q = step["rotation"](q, step["q_positions"][:q.shape[0]])
        if step["gathered"]:
            k, v = self._pages(paged_kv_cache)
            k, v = self._gather.gather(k, step["rotation"]), self._gather.gather(v)
            impl.forward_split(q, k, v, step["metadata"], out, lse_rows, *scales, stream)
        elif isinstance(paged_kv_cache, (tuple, list)):
            impl.forward_split(q, *self._pages(paged_kv_cache), step["metadata"], out, lse_rows, *scales, stream)
        else:
            cache = permuted(paged_kv_cache, (0, 1, 3, 2, 4)) if self._layout == "HND" else paged_kv_cache
            impl.forward(q, None, None, cache, step["metadata"], out, lse_rows, *scales, stream)
        if v_factor is not None:
            scale_in_place(out, v_factor)  # FlashInfer's own step after its kernel; the LSE is unchanged
        if not return_lse:
            return out
        if lse is None:
            lse = empty(q, (q.shape[0], q.shape[1]), float32=True)
        store_transposed(lse, lse_rows, 1.0 / LN2)
        return out, lse

    def run_return_lse(self, q, paged_kv_cache, **kwargs):
        """FlashInfer's run(..., return_lse=True)."""
        return self.run(q, paged_kv_cache, return_lse=True, **kwargs)

    def _pages(self, paged_kv_cache):
        """The cache's K and V pages as [num_pages, page_size, Hkv, D] views, whichever layout and form."""
        if isinstance(paged_kv_cache, (tuple, list)):
            k, v = paged_kv_cache
        else:
            k, v = paged_kv_cache[:, 0], paged_kv_cache[:, 1]
        if self._layout == "HND":
            k, v = permuted(k, (0, 2, 1, 3)), permuted(v, (0, 2, 1, 3))
        return k, v


def _page_rows(starts, flat, rows):
    """The block table of FlashInfer's pages: row r lists the pages of request rows[r]."""
    pages = np.diff(starts)
    table = np.zeros((len(rows), max(int(pages.max(initial=0)), 1)), np.int32)
    for r, source in enumerate(rows):
        table[r, :pages[source]] = flat[starts[source]:starts[source] + pages[source]]
    return table


def _split_long_queries(qsl, seq_lens, causal):
    """Requests as the library takes them (query tokens <= keys): a non-causal request with more query
    tokens than keys becomes consecutive parts of at most `keys` tokens over the same pages (each
    token's result does not depend on the others). Returns (qsl, seq_lens, source request per row)."""
    query_lens = np.diff(qsl)
    long = query_lens > seq_lens
    if not long.any():
        return qsl, seq_lens, np.arange(len(seq_lens))
    if causal:
        r = int(long.argmax())
        raise ValueError("request %d has %d query tokens but %d keys: with causal=True its first %d tokens would "
                         "see no key (allowed: qo_len <= kv_len)" % (r, query_lens[r], seq_lens[r],
                                                                      query_lens[r] - seq_lens[r]))
    starts, lens, rows = [], [], []
    for r, (start, n, keys) in enumerate(zip(qsl[:-1], query_lens, seq_lens)):
        part = max(int(keys), 1) if n > keys else max(int(n), 1)
        for offset in range(0, max(int(n), 1), part):
            starts.append(start + offset)
            lens.append(keys)
            rows.append(r)
    if any(k == 0 for k, r in zip(lens, rows) if query_lens[r]):
        raise ValueError("a request with query tokens has no keys (kv_len 0)")
    return np.append(np.array(starts, np.int64), qsl[-1]), np.array(lens, np.int64), np.array(rows)

