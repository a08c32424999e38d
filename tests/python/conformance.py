"""What the conformance suites share: a float64 reference of docs/attention.md written here (PyTorch,
double precision), paged caches with random block tables, FP8 e4m3 decoding, and the grid sampler.

The peers' grids (vLLM's tests/kernels/attention, FlashInfer's tests/attention) are reproduced as
parameter products. On this CPU a fixed-seed sample of each runs (a few cases per grid, minutes in
all); PAGEDATTN_FULL_GRID=1 runs every case (for a GPU machine, or a long CPU run), and
PAGEDATTN_GRID_SHARD=i/n its i-th of n interleaved shares (a full grid over several shorter runs)."""
import itertools
import math
import os
import random
import unittest

try:
    import torch
except ImportError:  # the suites skip visibly
    torch = None

FULL_GRID = os.environ.get("PAGEDATTN_FULL_GRID") == "1"
SAMPLE = int(os.environ.get("PAGEDATTN_GRID_SAMPLE", "6"))


def grid_shard(text):
    """(i, n) from PAGEDATTN_GRID_SHARD's "i/n" (0 <= i < n); (0, 1) when unset."""
    if not text:
        return 0, 1
    index, _, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i, n = -1, 0
    if not 0 <= i < n:
        raise ValueError("PAGEDATTN_GRID_SHARD = %r (allowed: i/n with 0 <= i < n, such as 0/4)" % text)
    return i, n


SHARD = grid_shard(os.environ.get("PAGEDATTN_GRID_SHARD"))
# vLLM's and FlashInfer's tolerances for 16-bit results; float32 runs use the library's own bound.
TOLERANCE = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (1.5e-2, 1e-2)}


def grid(name, seed, **axes):
    """The product of `axes` as dicts: every case with PAGEDATTN_FULL_GRID=1, else SAMPLE of them
    drawn with a fixed seed (the same ones on every run); then the shard's share of those."""
    names = list(axes)
    cases = [dict(zip(names, values)) for values in itertools.product(*(axes[n] for n in names))]
    if not (FULL_GRID or len(cases) <= SAMPLE):
        cases = random.Random("%s:%d" % (name, seed)).sample(cases, SAMPLE)
    index, count = SHARD
    return cases[index::count]


def needs_torch(test_class):
    return unittest.skipIf(torch is None, "PyTorch is not importable")(test_class)


def needs_gpu(test):
    """A GPU variant of a grid: skipped, with the reason, where no CUDA device is visible."""
    present = torch is not None and torch.cuda.is_available()
    return unittest.skipUnless(present, "needs a CUDA device (none visible here)")(test)


def dtype(name):
    return getattr(torch, name)


def attention(q, k, v, causal, scale, window=(-1, -1), softcap=0.0, sinks=None):
    """One request in float64: q [Tq, Hq, D], k / v [Tk, Hkv, D] -> (out [Tq, Hq, D], lse [Tq, Hq] natural
    log). Causal and windows are aligned bottom-right (query i sits at position Tk - Tq + i). Rows with
    no visible key give out 0 and lse -inf."""
    q, k, v = q.double(), k.double(), v.double()
    tq, hq = q.shape[0], q.shape[1]
    tk, group = k.shape[0], hq // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    logits = torch.einsum("qhd,khd->hqk", q, k) * scale
    if softcap:
        logits = softcap * torch.tanh(logits / softcap)
    pos = torch.arange(tq).unsqueeze(1) + (tk - tq)
    key = torch.arange(tk).unsqueeze(0)
    hidden = torch.zeros(tq, tk, dtype=torch.bool)
    if causal:
        hidden |= key > pos
    if window[0] >= 0:
        hidden |= key < pos - window[0]
    if window[1] >= 0:
        hidden |= key > pos + window[1]
    logits = logits.masked_fill(hidden, float("-inf"))
    if sinks is not None:
        sink = sinks.double().view(hq, 1, 1).expand(hq, tq, 1)
        logits = torch.cat([logits, sink], dim=2)
        v = torch.cat([v, torch.zeros(1, hq, v.shape[2], dtype=v.dtype)], dim=0)
    lse = torch.logsumexp(logits, dim=2)
    weights = torch.exp(logits - lse.unsqueeze(2)).nan_to_num(0.0)
    out = torch.einsum("hqk,khd->qhd", weights, v)
    return out, lse.t()


def llama_rope(x, positions, theta=1e4, scale=1.0):
    """FlashInfer's ROPE_LLAMA in float64: x [T, H, D] turned at positions [T]; dim i < D/2 pairs with
    i + D/2 at frequency theta^(-2i / D) / scale."""
    x = x.double()
    half = x.shape[-1] // 2
    freq = theta ** (-torch.arange(half, dtype=torch.float64) * 2.0 / x.shape[-1]) / scale
    angle = torch.as_tensor(positions, dtype=torch.float64).unsqueeze(1) * freq
    cos, sin = angle.cos().unsqueeze(1), angle.sin().unsqueeze(1)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)


def paged_attention(q, key_cache, value_cache, query_lens, kv_lens, block_table, causal, scale, **features):
    """attention() per request over a paged cache [num_blocks, block_size, Hkv, D] and its table."""
    block_size = key_cache.shape[1]
    outs, lses, start = [], [], 0
    for r, (ql, kl) in enumerate(zip(query_lens, kv_lens)):
        blocks = block_table[r, :math.ceil(kl / block_size)].long()
        k = key_cache[blocks].reshape(-1, *key_cache.shape[2:])[:kl]
        v = value_cache[blocks].reshape(-1, *value_cache.shape[2:])[:kl]
        out, lse = attention(q[start:start + ql], k, v, causal, scale, **features)
        outs.append(out)
        lses.append(lse)
        start += ql
    return torch.cat(outs), torch.cat(lses)


def random_table(num_seqs, kv_lens, block_size, num_blocks, generator):
    """A random block table as vLLM's tests make one (torch.randint: a request may name a block twice)."""
    width = max(math.ceil(max(kv_lens) / block_size), 1)
    return torch.randint(0, num_blocks, (num_seqs, width), generator=generator, dtype=torch.int32)


def offsets(lengths):
    return torch.tensor([0] + list(lengths), dtype=torch.int32).cumsum(0, dtype=torch.int32)


def e4m3_to_float(codes):
    """FP8 e4m3fn bytes (uint8 tensor) as float64 values."""
    codes = codes.long()
    sign = torch.where(codes >= 128, -1.0, 1.0).double()
    exponent, mantissa = (codes >> 3) & 0xF, (codes & 0x7).double()
    normal = (1 + mantissa / 8) * torch.pow(2.0, (exponent - 7).double())
    value = torch.where(exponent == 0, mantissa / 8 * 2.0 ** -6, normal)
    return sign * value


def assert_close(test, got, want, dtype_name, what, scale=1.0):
    """got within the dtype's (atol, rtol) of the float64 want, every element finite where want is."""
    atol, rtol = TOLERANCE[dtype_name]
    got, want = got.double(), want.double()
    test.assertTrue(bool(torch.isfinite(got[torch.isfinite(want)]).all()), "%s: non-finite values" % what)
    err = (got - want).abs() - (atol + rtol * want.abs()) * scale
    test.assertLessEqual(float(err.max()) if err.numel() else 0.0, 0.0, "%s: max abs error %.3g" % (
        what, float((got - want).abs().max()) if err.numel() else 0.0))
