"""Issue 11's GPU acceptance, run on a CUDA machine with PyTorch 2.x (not part of CTest):

1. flash_attn_varlen_func (and reshape_and_cache_flash filling the cache) against PyTorch's
   scaled_dot_product_attention on K/V gathered through the block table, over vLLM's
   test_attention_backends batch specs and the feature cases (case files given on the command line);
   an explicit float32 softmax where SDPA cannot express the feature (soft cap, sinks) and for the LSE;
2. the op captured in a torch.cuda.CUDAGraph and replayed with new sequence lengths;
3. torch.compile(fullgraph=True) of a function calling torch.ops.pagedattn.flash_attn_varlen;
4. the host time of one decode call from Python against the same forward looped in C++.

Usage: python3 h200_acceptance.py OUT.json CASE.json ...
"""
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import pagedattn as pa
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


def check_cache_write(batch):
    """The non-FP8 cache holds the written keys exactly where slot_mapping put them."""
    if batch.kv in FP8:
        return True
    flat = batch.cache[:, 0].reshape(-1, batch.hkv, batch.d) if batch.case.get("kv_layout") != "HND" else None
    if flat is None:
        return True
    idx = [i for i, s in enumerate(batch.slots) if s >= 0]
    got = flat[torch.tensor([batch.slots[i] for i in idx], device=DEV)]
    return bool(torch.equal(got, batch.k_all[torch.tensor(idx, device=DEV)]))


def correctness(cases, report):
    gen = torch.Generator().manual_seed(0)
    all_ok = True
    for case in cases:
        if case.get("kv_cache_dtype", "auto") in FP8 and FP8[case["kv_cache_dtype"]] is None:
            print("%-26s skipped: this torch has no FP8 dtypes" % case["name"])
            continue
        batch = Batch(case, gen)
        out, lse = batch.call()
        sync()
        ok, err, lse_err, ref = compare(batch, out, lse)
        written = check_cache_write(batch)
        line = dict(case=case["name"], ok=ok and written, max_abs_err=err, lse_err=lse_err, reference=ref)
        if batch.cpl:
            md = vllm_compat.get_scheduler_metadata(
                len(batch.seq_lens), max(batch.query_lens), max(batch.seq_lens), batch.hq, batch.hkv, batch.d,
                batch.seqused, qkv_dtype=batch.dtype, cu_seqlens_q=batch.qsl, page_size=batch.bs, causal=True,
                block_table=batch.table, common_prefix_len=batch.cpl)
            out, lse = batch.call(scheduler_metadata=md)
            sync()
            c_ok, c_err, c_lse, _ = compare(batch, out, lse)
            line.update(cascade_ok=c_ok, cascade_err=c_err)
            line["ok"] = line["ok"] and c_ok
        all_ok &= line["ok"]
        report["correctness"].append(line)
        print("%-26s %s max_abs_err %.3g lse_err %.3g vs %s%s" % (
            case["name"], "PASS" if line["ok"] else "FAIL", err, lse_err, ref,
            " (cascade %.3g)" % line["cascade_err"] if batch.cpl else ""), flush=True)
    return all_ok


def graph_replay(report):
    """Capture a decode step with scheduler metadata, replay it with new lengths."""
    gen = torch.Generator().manual_seed(1)
    max_len = 4096
    case = dict(name="graph_decode", seq_lens=[max_len] * 8, query_lens=[1] * 8)
    batch = Batch(case, gen)  # the table covers 4096 tokens per request; every slot written
    plan = dict(cu_seqlens_q=batch.qsl, page_size=batch.bs, causal=True, block_table=batch.table,
                cu_seqlens_q_cpu=batch.qsl.cpu())
    out = torch.empty_like(batch.q)

    def schedule(lengths):
        batch.seqused.copy_(torch.tensor(lengths, dtype=torch.int32))
        return vllm_compat.get_scheduler_metadata(8, 1, max_len, batch.hq, batch.hkv, batch.d, batch.seqused,
                                                  qkv_dtype=batch.dtype, cache_seqlens_cpu=torch.tensor(lengths,
                                                  dtype=torch.int32), **plan)

    def step(md):
        vllm_compat.flash_attn_varlen_func(
            batch.q, batch.cache[:, 0], batch.cache[:, 1], 1, batch.qsl, max_len, seqused_k=batch.seqused,
            softmax_scale=batch.scale, causal=True, block_table=batch.table, out=out, scheduler_metadata=md)

    lengths0 = [128, 256, 512, 1024, 128, 256, 512, 1024]
    md = schedule(lengths0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step(md)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(md)
    results = []
    for lengths in (lengths0, [4096, 1, 3000, 17, 2048, 999, 4000, 64], [37] * 8):
        schedule(lengths)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        sdpa, _, _ = batch.reference(lengths)
        atol, rtol = TOL["bf16"]
        ok = bool(((out.float() - sdpa).abs() <= atol + rtol * sdpa.abs()).all())
        results.append(dict(lengths=lengths, ok=ok, max_abs_err=(out.float() - sdpa).abs().max().item()))
        print("graph replay lengths %s: %s max_abs_err %.3g" % (lengths, "PASS" if ok else "FAIL",
                                                                 results[-1]["max_abs_err"]), flush=True)
    report["graph"] = results
    return all(r["ok"] for r in results)


def compiled(report):
    gen = torch.Generator().manual_seed(2)
    batch = Batch(dict(name="compile", seq_lens=[300, 1000, 77], query_lens=[1, 16, 77]), gen)

    def fn(q, k, v, qsl, seqs, table):
        out, lse = torch.ops.pagedattn.flash_attn_varlen(q, k, v, qsl, seqs, table, 77, 1000, None, True)
        return out.float() * 2.0, lse

    args = (batch.q, batch.cache[:, 0], batch.cache[:, 1], batch.qsl, batch.seqused, batch.table)
    want, want_lse = fn(*args)
    results = {}
    for backend in ("aot_eager", "inductor"):
        start = time.time()
        try:
            got, got_lse = torch.compile(fn, fullgraph=True, backend=backend)(*args)
            torch.cuda.synchronize()
            ok = torch.equal(got, want) and torch.equal(got_lse, want_lse)
            results[backend] = dict(ok=ok, seconds=time.time() - start)
        except Exception as error:  # report and go on: the other backend may still pass
            results[backend] = dict(ok=False, error=repr(error)[:300])
        print("torch.compile(fullgraph=True, backend=%s): %s" % (backend, results[backend]), flush=True)
    report["compile"] = results
    return results["aot_eager"]["ok"]


def overhead(report):
    """Host microseconds per decode call: the forward looped in C++ vs impl.forward from Python vs
    the drop-in with scheduler metadata, on a small and a medium decode step."""
    report["overhead_us"] = {}
    ok = True
    for name, seq_lens in (("decode_1x64", [64]), ("decode_8x512", [512] * 8)):
        medians = overhead_of(dict(name=name, seq_lens=seq_lens, query_lens=[1] * len(seq_lens)))
        report["overhead_us"][name] = medians
        print("%s per-call host time (us, median of 7 x 200 calls): %s" % (name, json.dumps(
            {k: round(x, 2) for k, x in medians.items()})), flush=True)
        ok &= medians["python_minus_cpp_us"] <= 10.0
    return ok


def overhead_of(case):
    gen = torch.Generator().manual_seed(3)
    batch = Batch(case, gen)
    b, max_len = len(batch.seq_lens), max(batch.seq_lens)
    md = vllm_compat.get_scheduler_metadata(b, 1, max_len, batch.hq, batch.hkv, batch.d, batch.seqused,
                                            qkv_dtype=batch.dtype, cu_seqlens_q=batch.qsl, page_size=batch.bs,
                                            causal=True, block_table=batch.table)
    out = torch.empty_like(batch.q)
    k, v = batch.cache[:, 0], batch.cache[:, 1]
    call = lambda: vllm_compat.flash_attn_varlen_func(batch.q, k, v, 1, batch.qsl, max_len, seqused_k=batch.seqused,
                                                      softmax_scale=batch.scale, causal=True,
                                                      block_table=batch.table, out=out, scheduler_metadata=md)
    call()
    impl = next(iter(md.layers.values()))[0]
    attn = md.attn_metadata
    n = 200

    def host_us(fn):
        sync()
        start = time.perf_counter()
        for _ in range(n):
            fn()
        host = (time.perf_counter() - start) / n * 1e6
        sync()
        return host

    samples = {"cpp_loop": [], "impl_forward": [], "flash_attn_varlen_func": []}
    for _ in range(7):
        sync()
        samples["cpp_loop"].append(impl.time_forward_host(batch.q, batch.cache, attn, out, None, n))
        sync()
        samples["impl_forward"].append(host_us(lambda: impl.forward(batch.q, None, None, batch.cache, attn, out)))
        samples["flash_attn_varlen_func"].append(host_us(call))
    medians = {name: statistics.median(v) for name, v in samples.items()}
    if DEV.startswith("cuda"):  # GPU time of the step, for context (CUDA events over n calls)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            call()
        stop.record()
        torch.cuda.synchronize()
        medians["gpu_us_per_call"] = start.elapsed_time(stop) * 1e3 / n
    medians["python_minus_cpp_us"] = medians["flash_attn_varlen_func"] - medians["cpp_loop"]
    return medians


def wrong_device(report):
    """A host array given to the CUDA backend is a ValueError naming it."""
    gen = torch.Generator().manual_seed(4)
    batch = Batch(dict(name="device", seq_lens=[40], query_lens=[1]), gen)
    try:
        vllm_compat.flash_attn_varlen_func(batch.q.cpu(), batch.cache[:, 0], batch.cache[:, 1], 1, batch.qsl, 40,
                                           seqused_k=batch.seqused, block_table=batch.table, causal=True)
        report["wrong_device"] = "no error"
        return False
    except ValueError as error:
        report["wrong_device"] = str(error)
        print("host query to FLASH_ATTN: ValueError: %s" % error, flush=True)
        return "query" in str(error)


def main():
    out_path, case_files = sys.argv[1], sys.argv[2:]
    cases = [json.load(open(f)) for f in case_files]
    name = torch.cuda.get_device_name(0) if DEV.startswith("cuda") else "cpu"
    print("torch %s, %s; pagedattn %s, cuda archs %s" % (torch.__version__, name, pa.__version__, pa.cuda_archs),
          flush=True)
    report = {"correctness": []}
    verdict = {}
    parts = [("correctness", lambda: correctness(cases, report)), ("graph", lambda: graph_replay(report)),
             ("overhead", lambda: overhead(report)), ("wrong_device", lambda: wrong_device(report)),
             ("compile", lambda: compiled(report))]
    if not DEV.startswith("cuda"):
        parts = [parts[0], parts[2]]
    for name, fn in parts:
        try:
            verdict[name] = fn()
        except Exception as error:
            import traceback

            traceback.print_exc()
            verdict[name] = False
            report[name + "_error"] = repr(error)
        json.dump(dict(report, verdict=verdict), open(out_path, "w"), indent=1)
    print("verdict:", verdict, flush=True)
    sys.exit(0 if all(verdict.values()) else 1)


if __name__ == "__main__":
    main()
