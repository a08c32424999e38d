"""flash_attn_varlen_func's context parallelism (cp_world_size, cp_rank, cp_tot_seqused_k) on CPU_ATTN (and on a
CUDA backend with bf16 tensors where a GPU is visible), as
vLLM's FA3 fork defines it: rank r stores the keys at positions t with t % N == r and returns its partial
attention under a causal mask at absolute positions. Each rank's output and LSE match a float64 partial;
the ranks combined by LSE match float64 attention over the whole sequence and the N = 1 call; a cache
sharded another way (runs of 2 tokens per rank) gives the wrong answer; bad arguments are ValueErrors."""
import unittest

import numpy as np

from pagedattn import _vllm_cp
from pagedattn import vllm_compat as vc

try:
    import torch
except ImportError:
    torch = None

H, HKV, D, BS = 4, 2, 32, 8
CUDA_BS = 16  # the CUDA backends' pages are multiples of 16
TOTALS = [1, 17, 40, 64, 33]  # keys per request over all ranks
QUERY_LENS = [1, 1, 4, 16, 33]  # decodes, a spec-verify of 4, a chunked prefill, a prefill without context
TOLERANCE = 2e-5  # float32 kernels against the float64 oracle, N(0, 1) inputs
CUDA_TOLERANCE = 2e-2  # bf16 outputs (inputs rounded to bf16 before the oracle sees them)


class Step:
    """One step's queries and every request's keys and values, at absolute positions."""

    def __init__(self, seed=0, totals=TOTALS, query_lens=QUERY_LENS, block_size=BS):
        self.block_size = block_size
        rng = np.random.default_rng(seed)
        self.totals, self.query_lens = list(totals), list(query_lens)
        self.offsets = np.concatenate([[0], np.cumsum(query_lens)]).astype(np.int32)
        self.q = rng.standard_normal((int(self.offsets[-1]), H, D)).astype(np.float32)
        self.keys = [rng.standard_normal((t, HKV, D)).astype(np.float32) for t in totals]
        self.values = [rng.standard_normal((t, HKV, D)).astype(np.float32) for t in totals]

    def rows(self):
        """(row, request, last visible position) of every query row under the causal mask."""
        for b, (total, q_len) in enumerate(zip(self.totals, self.query_lens)):
            for i in range(q_len):
                yield int(self.offsets[b]) + i, b, i + total - q_len

    def oracle(self, owned=lambda position: True, causal=True):
        """float64 attention of every row over the keys `owned` picks (out [T, H, D], lse [H, T])."""
        out = np.zeros(self.q.shape)
        lse = np.full((H, self.q.shape[0]), -np.inf)
        for row, b, last in self.rows():
            positions = [t for t in range(self.totals[b] if not causal else last + 1) if owned(t)]
            if not positions:
                continue
            for h in range(H):
                kv = h // (H // HKV)
                k, v = self.keys[b][positions, kv].astype(np.float64), self.values[b][positions, kv]
                logits = k @ self.q[row, h].astype(np.float64) / np.sqrt(D)
                top = logits.max()
                weights = np.exp(logits - top)
                out[row, h] = weights @ v.astype(np.float64) / weights.sum()
                lse[h, row] = top + np.log(weights.sum())
        return out, lse

    def rank_cache(self, rank_of, rank, seed):
        """Rank `rank`'s paged K/V cache (unused slots NaN, shuffled blocks), block table and key counts,
        for a sharding that puts position t on rank_of(t)."""
        held = [[t for t in range(total) if rank_of(t) == rank] for total in self.totals]
        bs = self.block_size
        blocks_per_request = max(-(-len(h) // bs) for h in held) or 1
        num_blocks = blocks_per_request * len(held)
        ids = np.random.default_rng(seed).permutation(num_blocks).astype(np.int32)
        table = ids.reshape(len(held), blocks_per_request)
        k = np.full((num_blocks, bs, HKV, D), np.nan, np.float32)
        v = np.full_like(k, np.nan)
        for b, positions in enumerate(held):
            for j, t in enumerate(positions):
                k[table[b, j // bs], j % bs] = self.keys[b][t]
                v[table[b, j // bs], j % bs] = self.values[b][t]
        return k, v, table, np.array([len(h) for h in held], np.int32)


def combine(partials):
    """float64 LSE combine of the ranks' (out, lse): the exact attention over all their keys."""
    lses = np.stack([p[1].astype(np.float64) for p in partials])
    top = np.max(lses, axis=0)
    safe = np.where(np.isfinite(top), top, 0.0)
    weights = np.exp(lses - safe)
    total = weights.sum(axis=0)
    out = sum(w.T[:, :, None] * p[0].astype(np.float64) for w, p in zip(weights, partials)) / total.T[:, :, None]
    return out, safe + np.log(total)


class Frame:
    """numpy arrays, torch CPU tensors, or torch CUDA tensors (floats as bf16)."""

    def __init__(self, name):
        self.name = name
        self.tolerance = CUDA_TOLERANCE if name == "torch_cuda" else TOLERANCE

    def array(self, values):
        if self.name == "numpy":
            return values
        tensor = torch.from_numpy(np.ascontiguousarray(values))
        if self.name == "torch_cuda":
            tensor = tensor.to("cuda", torch.bfloat16 if tensor.is_floating_point() else tensor.dtype)
        return tensor

    def numpy(self, values):
        return values if self.name == "numpy" else values.float().cpu().numpy()

    def step(self, **lengths):
        """A Step whose floats this frame carries exactly (rounded to bf16 on CUDA)."""
        cuda = self.name == "torch_cuda"
        step = Step(block_size=CUDA_BS if cuda else BS, **lengths)
        if cuda:
            rounded = lambda a: torch.from_numpy(a).bfloat16().float().numpy()
            step.q = rounded(step.q)
            step.keys = [rounded(k) for k in step.keys]
            step.values = [rounded(v) for v in step.values]
        return step


def frames():
    names = ["numpy"] + (["torch"] if torch is not None else [])
    return names + (["torch_cuda"] if torch is not None and torch.cuda.is_available() else [])


def call(frame, step, k, v, table, used, causal=True, **cp):
    out, lse = vc.flash_attn_varlen_func(
        frame.array(step.q), frame.array(k), frame.array(v), max(step.query_lens), frame.array(step.offsets),
        max(step.totals), seqused_k=frame.array(used), block_table=frame.array(table), causal=causal,
        return_softmax_lse=True, **cp)
    return frame.numpy(out), frame.numpy(lse)


def rank_partials(frame, step, world, causal=True, rank_of=None, used_of=None):
    """Every rank's (out, lse) from the drop-in, and the float64 partial each should equal."""
    rank_of = rank_of or (lambda t: t % world)
    totals = np.array(step.totals, np.int32)
    results = []
    for rank in range(world):
        k, v, table, used = step.rank_cache(rank_of, rank, seed=world * 10 + rank)
        got = call(frame, step, k, v, table, used, causal, cp_world_size=world, cp_rank=rank,
                   cp_tot_seqused_k=frame.array(totals))
        want = step.oracle(lambda t, r=rank: t % world == r, causal)
        results.append((got, want))
    return results


class RanksMatchTheOracle(unittest.TestCase):
    def check_close(self, got, want, what, tolerance=TOLERANCE):
        np.testing.assert_allclose(got[0], want[0], atol=tolerance, rtol=0, err_msg=what + ": out")
        np.testing.assert_allclose(got[1], want[1], atol=tolerance, rtol=0, err_msg=what + ": lse")

    def test_each_rank_and_their_combine(self):
        for frame_name in frames():
            frame = Frame(frame_name)
            step = frame.step()
            check_close = lambda got, want, what: self.check_close(got, want, what, frame.tolerance)
            for causal in (True, False):
                whole = step.oracle(causal=causal)
                k, v, table, used = step.rank_cache(lambda t: 0, 0, seed=1)
                one_rank = call(frame, step, k, v, table, used, causal)
                check_close(one_rank, whole, "%s N = 1" % frame_name)
                for world in (2, 3, 4, 8):
                    what = "%s N = %d causal = %s" % (frame_name, world, causal)
                    results = rank_partials(frame, step, world, causal)
                    for rank, (got, want) in enumerate(results):
                        check_close(got, want, "%s rank %d" % (what, rank))
                    combined = combine([got for got, _ in results])
                    check_close(combined, whole, what + " combined vs float64")
                    check_close(combined, one_rank, what + " combined vs the N = 1 call")

    def test_rows_without_keys_get_zero_and_minus_infinity(self):
        step = Step(totals=[3], query_lens=[3])  # rank 2 of 4 sees position 2 only; rank 3 sees nothing
        results = rank_partials(Frame("numpy"), step, 4)
        (out, lse), _ = results[3]
        np.testing.assert_array_equal(out, 0)
        np.testing.assert_array_equal(lse, -np.inf)
        (out, lse), _ = results[2]
        np.testing.assert_array_equal(out[:2], 0)
        self.assertTrue(np.all(np.isfinite(lse[:, 2])))

    def test_a_call_without_rows(self):
        k = np.zeros((2, BS, HKV, D), np.float32)
        out, lse = vc.flash_attn_varlen_func(
            np.zeros((0, H, D), np.float32), k, k, 0, np.zeros(1, np.int32), 0, seqused_k=np.zeros(0, np.int32),
            block_table=np.zeros((0, 1), np.int32), causal=True, return_softmax_lse=True, cp_world_size=2,
            cp_rank=1, cp_tot_seqused_k=np.zeros(0, np.int32))
        self.assertEqual(out.shape, (0, H, D))
        self.assertEqual(lse.shape, (H, 0))

    def test_explicit_single_rank_is_the_plain_call(self):
        step = Step()
        k, v, table, used = step.rank_cache(lambda t: 0, 0, seed=1)
        frame = Frame("numpy")
        plain = call(frame, step, k, v, table, used)
        explicit = call(frame, step, k, v, table, used, cp_world_size=1, cp_rank=0, cp_tot_seqused_k=None)
        np.testing.assert_array_equal(plain[0], explicit[0])
        np.testing.assert_array_equal(plain[1], explicit[1])


class WrongLayoutGivesTheWrongAnswer(unittest.TestCase):
    def test_runs_of_two_tokens_per_rank(self):
        # Totals that are multiples of 2 N give each rank the key counts of the FA3 layout, so the call runs;
        # but the keys sit at other positions than the causal mask assumes.
        step = Step(totals=[8, 16, 40], query_lens=[1, 4, 16])
        world = 2
        results = rank_partials(Frame("numpy"), step, world, rank_of=lambda t: (t // 2) % world)
        combined = combine([got for got, _ in results])
        error = np.max(np.abs(combined[0] - step.oracle()[0]))
        self.assertGreater(error, 0.05, "a cache sharded in runs of 2 must not pass for the FA3 layout")
        decode_rows = slice(0, 1)  # a decode sees every key, so the layout cannot show there
        np.testing.assert_allclose(combined[0][decode_rows], step.oracle()[0][decode_rows], atol=TOLERANCE)


class Refusals(unittest.TestCase):
    def setUp(self):
        self.step = Step()
        self.k, self.v, self.table, self.used = self.step.rank_cache(lambda t: t % 2, 0, seed=3)
        self.totals = np.array(self.step.totals, np.int32)

    def refused(self, pattern, **changes):
        kwargs = dict(cp_world_size=2, cp_rank=0, cp_tot_seqused_k=self.totals)
        kwargs.update(changes)
        used = kwargs.pop("used", self.used)
        with self.assertRaisesRegex(ValueError, pattern):
            call(Frame("numpy"), self.step, self.k, self.v, self.table, used, **kwargs)

    def test_bad_ranks(self):
        self.refused(r"cp_rank = 2 with cp_world_size = 2 \(allowed: 0 to 1\)", cp_rank=2)
        self.refused(r"cp_rank = 1 with cp_world_size = 1 \(allowed: 0 to 0\)", cp_world_size=1, cp_rank=1,
                     cp_tot_seqused_k=None)
        self.refused(r"cp_world_size = 0 \(allowed: at least 1\)", cp_world_size=0)
        self.refused(r"cp_tot_seqused_k is None with cp_world_size = 2 \(required", cp_tot_seqused_k=None)
        self.refused(r"cp_tot_seqused_k given with cp_world_size = 1", cp_world_size=1)

    def test_bad_totals(self):
        self.refused(r"cp_tot_seqused_k is int64 \[5\] \(allowed dtypes: int32\)", cp_tot_seqused_k=self.totals.astype(np.int64))
        self.refused(r"cp_tot_seqused_k is int32 \[4\] \(expected \[5\]", cp_tot_seqused_k=self.totals[:4])
        short = self.totals.copy()
        short[3] = 10
        self.refused(r"cp_tot_seqused_k\[3\] = 10 is below request 3's 16 query tokens", cp_tot_seqused_k=short)
        used = self.used.copy()
        used[2] += 1
        self.refused(r"seqused_k\[2\] = 21 but rank 0 of 2 stores 20 of cp_tot_seqused_k\[2\] = 40 keys", used=used)

    def test_features_not_served(self):
        self.refused(r"window_size = \[4, 0\] with cp_world_size = 2", window_size=(4, 0))
        self.refused(r"alibi_slopes with cp_world_size = 2", alibi_slopes=np.ones(H, np.float32))
        self.refused(r"s_aux with cp_world_size = 2", s_aux=np.ones(H, np.float32))

    def test_cpu_and_cuda_arrays_are_served(self):
        _vllm_cp.check_served("cpu", 2, (-1, -1), None, None)
        _vllm_cp.check_served("cuda:0", 2, (-1, -1), None, None)
        with self.assertRaisesRegex(ValueError, r"cp_world_size = 2 on mps \(allowed: cpu or cuda arrays\)"):
            _vllm_cp.check_served("mps", 2, (-1, -1), None, None)


if __name__ == "__main__":
    unittest.main()
