"""CuPy arrays through DLPack on the GPU (the path PyTorch tensors do not take): the drop-ins with
CuPy arrays on a CuPy non-blocking stream give the bytes the same calls give with PyTorch tensors.
CuPy has no bfloat16: an f16 step. Usage: python3 cupy_check.py"""
import sys

import cupy as cp
import numpy as np
import torch

from pagedattn import vllm_compat
from paged_batch import Batch


def main():
    batch = Batch(dict(name="cupy", dtype="f16", seq_lens=[100, 37, 300], query_lens=[1, 5, 30]),
                  torch.Generator().manual_seed(7))
    want = vllm_compat.flash_attn_varlen_func(
        batch.q, batch.cache[:, 0], batch.cache[:, 1], 30, batch.qsl, 300, seqused_k=batch.seqused, causal=True,
        block_table=batch.table)
    torch.cuda.synchronize()
    c = {name: cp.from_dlpack(t) for name, t in (("q", batch.q), ("cache", batch.cache), ("qsl", batch.qsl),
                                                  ("seqused", batch.seqused), ("table", batch.table))}
    fresh = cp.full_like(c["cache"], cp.nan)  # a cache rewritten through CuPy arrays
    key = cp.from_dlpack(batch.k_all)
    value = cp.from_dlpack(batch.cache[:, 1].reshape(-1, batch.hkv, batch.d))  # any values: V is copied below
    slots = cp.asarray(np.array(batch.slots, np.int64))
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        vllm_compat.reshape_and_cache_flash(key, value[: key.shape[0]], fresh[:, 0], fresh[:, 1], slots, "auto",
                                            stream=stream)
        fresh[:, 1] = c["cache"][:, 1]
        got = vllm_compat.flash_attn_varlen_func(
            c["q"], fresh[:, 0], fresh[:, 1], 30, c["qsl"], 300, seqused_k=c["seqused"], causal=True,
            block_table=c["table"], stream=stream)
    stream.synchronize()
    same = bool(cp.array_equal(got, cp.from_dlpack(want)))
    written = bool(cp.array_equal(fresh[:, 0].reshape(-1, batch.hkv, batch.d)[slots], key))
    print("cupy: output equals the PyTorch run's: %s; cache written through CuPy views: %s; out is %s" % (
        same, written, type(got).__module__), flush=True)
    sys.exit(0 if same and written else 1)


if __name__ == "__main__":
    main()
