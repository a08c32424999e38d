"""flash_attn_varlen_func's context parallelism, as vLLM's FA3 fork defines it (cp_world_size, cp_rank,
cp_tot_seqused_k; vLLM's MLA decode passes them, docs/dcp.md).

Rank r of N stores the keys at absolute positions t with t % N == r, its local key j being position
j * N + r (an interleave of 1). seqused_k counts the rank's keys, cp_tot_seqused_k every rank's. The call
returns the rank's partial attention and LSE, which the caller combines over the ranks. Causal masking is
at absolute positions: query row i of a request with q_len queries and T keys in all sees positions
t <= i + T - q_len, so the local keys it sees are a prefix of the rank's keys. Each query row runs as a
request of its own over that prefix; a row that sees no key gets a zero output and an LSE of -inf."""
import numpy as np

from . import _checks as check
from ._arrays import empty, from_host, to_host

SERVED_ON = ("cpu", "cuda")  # device kinds: CPU_ATTN, or the CUDA backends (16-bit arrays)


def check_ranks(cp_world_size, cp_rank, cp_tot_seqused_k):
    """(N, rank) after FA3's rules: N >= 1, 0 <= rank < N, cp_tot_seqused_k given exactly when N > 1."""
    world = check.integer(cp_world_size, "cp_world_size", low=1)
    rank = check.integer(cp_rank, "cp_rank", low=0)
    if rank >= world:
        raise ValueError("cp_rank = %d with cp_world_size = %d (allowed: 0 to %d)" % (rank, world, world - 1))
    if world == 1 and cp_tot_seqused_k is not None:
        raise ValueError("cp_tot_seqused_k given with cp_world_size = 1 (allowed: None; it counts the keys of "
                         "every rank under context parallelism)")
    if world > 1 and cp_tot_seqused_k is None:
        raise ValueError("cp_tot_seqused_k is None with cp_world_size = %d (required: each request's keys over "
                         "all ranks, int32 [num_reqs])" % world)
    return world, rank


def check_served(device, world, window, alibi_slopes, s_aux):
    """ValueError naming what context parallelism cannot serve here, and why."""
    if str(device).split(":")[0] not in SERVED_ON:
        raise ValueError("cp_world_size = %d on %s (allowed: cpu or cuda arrays)" % (world, device))
    if tuple(window) != (-1, -1):
        raise ValueError("window_size = %s with cp_world_size = %d: a sliding window is not supported under "
                         "context parallelism (as in FA3)" % (list(window), world))
    if alibi_slopes is not None:
        raise ValueError("alibi_slopes with cp_world_size = %d: a rank's keys are not at contiguous positions, "
                         "which ALiBi's distances need" % world)
    if s_aux is not None:
        raise ValueError("s_aux with cp_world_size = %d: each rank's partial would count the sinks, N times once "
                         "combined (allowed: None; add the sinks where the ranks are combined)" % world)


def local_lengths(total, world, rank):
    """How many of the first `total` positions rank `rank` of `world` stores (position t on rank t % world)."""
    return total // world + (total % world > rank)


class Rows:
    """Per query row of a call: the request it belongs to and the local keys it sees (0 for padding)."""

    def __init__(self, cu_seqlens_q, seqused_k, cp_tot_seqused_k, ranks, causal, num_rows, max_seqlen_k):
        world, rank = ranks
        offsets = np.asarray(to_host(cu_seqlens_q), np.int64)
        used = np.asarray(to_host(seqused_k), np.int64)
        batch = len(offsets) - 1
        check.array(cp_tot_seqused_k, "cp_tot_seqused_k", rank=1, dtypes=("int32",), shape=(batch,),
                    why="one total per request (cu_seqlens_q has %d offsets)" % (batch + 1))
        totals = np.asarray(to_host(cp_tot_seqused_k), np.int64)
        self.request = np.full(num_rows, -1, np.int64)
        self.keys = np.zeros(num_rows, np.int64)
        for b in range(batch):
            start, stop, total = int(offsets[b]), int(offsets[b + 1]), int(totals[b])
            if total < stop - start:
                raise ValueError("cp_tot_seqused_k[%d] = %d is below request %d's %d query tokens (its new tokens "
                                 "are keys too)" % (b, total, b, stop - start))
            stored = local_lengths(total, world, rank)
            if used[b] != stored:
                raise ValueError("seqused_k[%d] = %d but rank %d of %d stores %d of cp_tot_seqused_k[%d] = %d keys "
                                 "(position t on rank t %% cp_world_size)" % (b, used[b], rank, world, stored, b,
                                                                             total))
            if used[b] > max_seqlen_k:
                raise ValueError("request %d has more keys than max_seqlen_k = %d: %d (seqused_k)" % (
                    b, max_seqlen_k, used[b]))
            self.request[start:stop] = b
            if causal:
                last_seen = np.arange(stop - start) + total - (stop - start)
                self.keys[start:stop] = local_lengths(last_seen + 1, world, rank)
            else:
                self.keys[start:stop] = stored
        self.kept = np.flatnonzero(self.keys > 0)

    def all_kept(self):
        return len(self.kept) == len(self.keys)


def rank_partial(rows, q, block_table, out, return_lse, attend):
    """Runs attend(q_rows, cu_seqlens_q, seqused_k, max_seqlen_k, block_table, out_rows) over the rows that see
    a key, one request per row; the other rows get a zero output and an LSE of -inf."""
    kept = rows.kept
    if len(kept):
        offsets = from_host(block_table, np.arange(len(kept) + 1, dtype=np.int32))
        keys = from_host(block_table, rows.keys[kept].astype(np.int32))
        tables = block_table[from_host(block_table, rows.request[kept])]
        max_keys = int(rows.keys.max())
    if len(kept) and rows.all_kept():
        return attend(q, offsets, keys, max_keys, tables, out)
    out = empty(q, q.shape) if out is None else out
    lse = empty(q, (q.shape[1], q.shape[0]), float32=True) if return_lse else None
    out[...] = 0
    if lse is not None:
        lse[...] = -np.inf
    if len(kept):
        index = from_host(q, kept)
        got = attend(q[index], offsets, keys, max_keys, tables, None)
        out[index] = got[0] if return_lse else got
        if return_lse:
            lse[:, index] = got[1]
    return (out, lse) if return_lse else out
