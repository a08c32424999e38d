"""A random paged step on the GPU (or, for a preview, the CPU) and its float32 references: PyTorch's
scaled_dot_product_attention on K/V gathered through the block table, and an explicit softmax for
what SDPA cannot express (soft cap, sinks) and for the LSE. Used by h200_acceptance.py."""
import math
import os

import torch
import torch.nn.functional as F

from pagedattn import vllm_compat

DEV = os.environ.get("PAGEDATTN_TEST_DEVICE", "cuda:0")  # "cpu" previews parts 1 and 4 on the CPU backend
TOL = {"bf16": (1.5e-2, 1e-2), "f16": (5e-3, 5e-3)}
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
FP8 = {"fp8_e4m3": getattr(torch, "float8_e4m3fn", None), "fp8_e5m2": getattr(torch, "float8_e5m2", None)}


def sync():
    if DEV.startswith("cuda"):
        torch.cuda.synchronize()


def alibi_slopes(hq):
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / hq) for h in range(hq)], dtype=torch.float32, device=DEV)


class Batch:
    """A random paged step: shuffled blocks, NaN in every unused slot, the whole sequence written
    through reshape_and_cache_flash (a shared prefix once), queries for the new tokens."""

    def __init__(self, case, gen):
        c = self.case = case
        self.dtype = DTYPES[c.get("dtype", "bf16")]
        self.hq, self.hkv, self.d = c.get("num_heads", 32), c.get("num_kv_heads", 8), c.get("head_size", 128)
        self.bs = c.get("block_size", 16)
        self.kv = c.get("kv_cache_dtype", "auto")
        self.seq_lens, self.query_lens = c["seq_lens"], c["query_lens"]
        self.causal = c.get("causal", True)
        self.window = tuple(c.get("sliding_window") or (-1, -1))
        self.softcap = c.get("logits_soft_cap") or 0.0
        self.cpl = c.get("common_prefix_len", 0)
        b = len(self.seq_lens)
        blocks = [math.ceil(s / self.bs) for s in self.seq_lens]
        shared = self.cpl // self.bs
        num_blocks = sum(blocks) - shared * (b - 1) + 7
        perm = torch.randperm(num_blocks, generator=gen).tolist()
        self.table = torch.zeros((b, max(blocks)), dtype=torch.int32)
        for r in range(b):
            for j in range(blocks[r]):
                self.table[r, j] = perm[j] if j < shared else perm.pop()
        self.table = self.table.to(DEV)
        storage = torch.uint8 if self.kv in FP8 else self.dtype
        if c.get("kv_layout") == "HND":
            phys = torch.empty((num_blocks, 2, self.hkv, self.bs, self.d), dtype=storage, device=DEV)
            self.cache = phys.permute(0, 1, 3, 2, 4)
        else:
            self.cache = torch.empty((num_blocks, 2, self.bs, self.hkv, self.d), dtype=storage, device=DEV)
        self.cache.fill_(0x7F if self.kv in FP8 else float("nan"))
        if self.kv in FP8:
            self.cache = self.cache.view(FP8[self.kv])  # vLLM's view of an FP8 cache
        total = sum(self.seq_lens)
        k_all = torch.randn((total, self.hkv, self.d), generator=gen).to(DEV, self.dtype)
        v_all = torch.randn((total, self.hkv, self.d), generator=gen).to(DEV, self.dtype)
        slots = []
        for r, s in enumerate(self.seq_lens):
            for p in range(s):
                shared_token = p < self.cpl and r > 0
                slots.append(-1 if shared_token else int(self.table[r, p // self.bs]) * self.bs + p % self.bs)
        self.k_scale = self.v_scale = None
        if self.kv in FP8:
            per_head = c.get("kv_scale") == "head"
            amax = lambda x: (x.float().abs().amax(dim=(0, 2)) if per_head else x.float().abs().amax().reshape(1))
            self.k_scale, self.v_scale = amax(k_all) / 64, amax(v_all) / 64
        vllm_compat.reshape_and_cache_flash(k_all, v_all, self.cache[:, 0], self.cache[:, 1],
                                            torch.tensor(slots, dtype=torch.int64, device=DEV), self.kv,
                                            self.k_scale, self.v_scale)
        self.k_all, self.slots = k_all, slots
        self.q = torch.randn((sum(self.query_lens), self.hq, self.d), generator=gen).to(DEV, self.dtype)
        qsl = [0]
        for ql in self.query_lens:
            qsl.append(qsl[-1] + ql)
        self.qsl = torch.tensor(qsl, dtype=torch.int32, device=DEV)
        self.seqused = torch.tensor(self.seq_lens, dtype=torch.int32, device=DEV)
        self.scale = c.get("scale") or 1.0 / math.sqrt(self.d)
        self.slopes = alibi_slopes(self.hq) if c.get("alibi") else None
        self.sinks = torch.randn(self.hq, generator=gen).to(DEV) if c.get("sinks") else None

    def descale(self, s):
        """As vLLM passes descales: [num_reqs, Hkv], broadcast (stride 0) over requests."""
        if s is None:
            return None
        b = len(self.seq_lens)
        return s.expand(b, self.hkv) if s.numel() == 1 else s[None].expand(b, -1)

    def call(self, **extra):
        return vllm_compat.flash_attn_varlen_func(
            self.q, self.cache[:, 0], self.cache[:, 1], max(self.query_lens), self.qsl, max(self.seq_lens),
            seqused_k=self.seqused, softmax_scale=self.scale, causal=self.causal, window_size=list(self.window),
            softcap=self.softcap, alibi_slopes=self.slopes, block_table=self.table, return_softmax_lse=True,
            k_descale=self.descale(self.k_scale), v_descale=self.descale(self.v_scale), s_aux=self.sinks,
            kv_cache_dtype=self.kv, **extra)

    def gathered(self, r, plane, scale):
        s = self.seq_lens[r]
        x = self.cache[self.table[r, : math.ceil(s / self.bs)].long(), plane].reshape(-1, self.hkv, self.d)[:s]
        x = x.float()
        if scale is not None:
            x = x * scale.reshape(1, -1, 1)
        return x.repeat_interleave(self.hq // self.hkv, dim=1).transpose(0, 1)  # [Hq, s, D]

    def reference(self, seq_lens=None):
        """(SDPA out or None, explicit out, explicit LSE) for every token, float32."""
        if seq_lens is not None:
            self.seq_lens = seq_lens
        sdpa_ok = not self.softcap and self.sinks is None
        outs, exp_outs, lses = [], [], []
        for r, (s, ql) in enumerate(zip(self.seq_lens, self.query_lens)):
            q = self.q[int(self.qsl[r]) : int(self.qsl[r]) + ql].float().transpose(0, 1)  # [Hq, ql, D]
            k, v = self.gathered(r, 0, self.k_scale), self.gathered(r, 1, self.v_scale)
            p = (s - ql + torch.arange(ql, device=DEV))[:, None]
            j = torch.arange(s, device=DEV)[None, :]
            visible = torch.ones((ql, s), dtype=torch.bool, device=DEV)
            if self.causal:
                visible &= j <= p
            if self.window[0] >= 0:
                visible &= j >= p - self.window[0]
            if self.window[1] >= 0:
                visible &= j <= p + self.window[1]
            bias = torch.zeros((self.hq, ql, s), device=DEV)
            if self.slopes is not None:
                bias = bias - self.slopes[:, None, None] * (p - j).abs()[None].float()
            mask = bias.masked_fill(~visible[None], float("-inf"))
            scores = self.scale * q @ k.transpose(1, 2)
            if self.softcap:
                scores = self.softcap * torch.tanh(scores / self.softcap)
            scores = scores + mask
            if self.sinks is not None:
                scores = torch.cat([scores, self.sinks[:, None, None].expand(-1, ql, 1)], dim=2)
            lse = torch.logsumexp(scores, dim=2)  # [Hq, ql]
            prob = torch.exp(scores - lse[..., None]).nan_to_num(0.0)[..., :s]
            exp_outs.append((prob @ v).transpose(0, 1))
            lses.append(lse)
            if sdpa_ok and hasattr(F, "scaled_dot_product_attention"):
                o = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask[None], scale=self.scale)
                outs.append(o[0].nan_to_num(0.0).transpose(0, 1))
        sdpa = torch.cat(outs) if outs else None
        return sdpa, torch.cat(exp_outs), torch.cat(lses, dim=1)


def compare(batch, out, lse, seq_lens=None):
    sdpa, explicit, ref_lse = batch.reference(seq_lens)
    want = sdpa if sdpa is not None else explicit
    atol, rtol = TOL[batch.case.get("dtype", "bf16")]
    err = (out.float() - want).abs()
    bound = atol + rtol * want.abs()
    finite = torch.isfinite(ref_lse)
    lse_err = (lse - ref_lse).abs()[finite].max().item() if finite.any() else 0.0
    ok = bool((err <= bound).all()) and lse_err < 1e-2 and bool(torch.isfinite(out).all())
    return ok, err.max().item(), lse_err, "sdpa" if sdpa is not None else "explicit"
