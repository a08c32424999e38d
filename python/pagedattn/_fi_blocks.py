"""FlashInfer's pages gathered into 16-token blocks for one step: FlashInfer takes any page size, the
GPU kernels take multiples of 16, and RoPE in the drop-in needs each request's keys at their
positions. plan() maps every key of every request to its (page, slot) on the host; run() gathers K
and V with one indexing op each (on the caller's device and stream), request r's keys filling
consecutive blocks from position 0. Under use_cuda_graph the maps live at fixed addresses, sized once
for the fixed page-table buffers, and each plan rewrites them in place."""
import numpy as np

from ._arrays import from_host, store_host

BLOCK = 16  # a block size every backend takes


class BlockGather:
    """One wrapper's gather: the maps of the newest plan, and the copy they drive at run()."""

    def __init__(self, like, graph, fixed_pages=None, fixed_batch=None):
        self._like, self._graph = like, graph
        self._fixed = (fixed_pages, fixed_batch)  # the fixed buffers' pages and requests (use_cuda_graph)
        self._maps = None  # device (page, slot, position) per gathered key

    def plan(self, starts, flat, seq_lens, page_size, rows):
        """The step's block table (host int32, one row per row of `rows`, the source request of each)
        over the gathered blocks; starts / flat / seq_lens: the requests' pages and key counts."""
        blocks = -(-seq_lens // BLOCK)
        first = np.concatenate([[0], np.cumsum(blocks)]).astype(np.int64)
        request = np.repeat(np.arange(len(blocks)), blocks * BLOCK)
        position = np.arange(int(first[-1]) * BLOCK) - first[:-1][request] * BLOCK
        key = np.minimum(position, seq_lens[request] - 1)  # a padding slot repeats the last key (never read)
        page = flat[starts[:-1][request] + key // page_size] if len(key) else np.zeros(0, np.int64)
        self._write(page_size, page.astype(np.int64), key % page_size, position)
        table = np.zeros((len(rows), max(int(blocks.max(initial=0)), 1)), np.int32)
        for r, source in enumerate(rows):
            table[r, :blocks[source]] = first[source] + np.arange(blocks[source])
        return table

    def _write(self, page_size, page, slot, position):
        host = [np.ascontiguousarray(a, dtype=np.int64) for a in (page, slot, position)]
        if not self._graph:
            self._maps = tuple(from_host(self._like, a) for a in host)
            return
        if self._maps is None:
            pages, batch = self._fixed
            # sum of ceil(kv_len / 16) over the batch is at most pages * page_size / 16 + batch blocks
            capacity = max(len(page), (pages * page_size // BLOCK + batch) * BLOCK)
            self._maps = tuple(from_host(self._like, np.zeros(capacity, np.int64)) for _ in host)
        if len(page) > self._maps[0].shape[0]:
            raise ValueError("the plan gathers %d keys; the CUDA-graph buffers hold %d (sized at the first plan)" % (
                len(page), self._maps[0].shape[0]))
        for buffer, values in zip(self._maps, host):
            store_host(buffer[:len(values)], values)
            store_host(buffer[len(values):], np.zeros(buffer.shape[0] - len(values), np.int64))

    def gather(self, pages, rotate=None):
        """pages [num_pages, page_size, Hkv, D] (any strides) -> blocks [n, 16, Hkv, D], contiguous;
        rotate(keys, positions), where given, turns each key at its position in its request."""
        page, slot, position = self._maps
        rows = pages[page, slot]
        if rotate is not None:
            rows = rotate(rows, position)
        return rows.reshape((rows.shape[0] // BLOCK, BLOCK) + tuple(rows.shape[1:]))
