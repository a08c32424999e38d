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
import statistics
import sys
import time

import torch

import pagedattn as pa
from pagedattn import _vllm_schedule, flashinfer_compat, vllm_compat
from paged_batch import DEV, FP8, TOL, Batch, compare, sync


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
                batch.seqused, qkv_dtype=batch.dtype, cu_seqlens_q=batch.qsl, page_size=batch.bs,
                causal=batch.causal, block_table=batch.table, common_prefix_len=batch.cpl)
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


def flashinfer_wrappers(cases, report):
    """BatchPrefillWithPagedKVCacheWrapper (and the decode wrapper on all-decode batches) over the
    FLASH_ATTN backend (FLASHINFER is not in this build), FlashInfer's page table and cache format,
    against the same references; the LSE comes back in base 2."""
    gen = torch.Generator().manual_seed(5)
    results = []
    for case in cases:
        window = case.get("sliding_window") or [-1, -1]
        if case.get("alibi") or not (window[1] == (0 if case.get("causal", True) else -1) or window == [-1, -1]):
            continue
        batch = Batch(case, gen)
        pages = [math.ceil(s / batch.bs) for s in batch.seq_lens]
        table = batch.table.cpu()
        indptr = torch.tensor([0] + pages, dtype=torch.int32).cumsum(0, dtype=torch.int32)
        indices = torch.cat([table[r, :n] for r, n in enumerate(pages)]).to(torch.int32)
        last = torch.tensor([s - (n - 1) * batch.bs for s, n in zip(batch.seq_lens, pages)], dtype=torch.int32)
        layout = case.get("kv_layout", "NHD")
        physical = batch.cache.permute(0, 1, 3, 2, 4) if layout == "HND" else batch.cache
        common = dict(window_left=window[0], logits_soft_cap=batch.softcap or None, sm_scale=batch.scale,
                      q_data_type=batch.dtype, kv_data_type=batch.cache.dtype)
        kinds = ["prefill"] + (["decode"] if set(batch.query_lens) == {1} else [])
        for kind in kinds:
            workspace = torch.empty(16, dtype=torch.uint8, device=DEV)
            if kind == "decode":
                w = flashinfer_compat.BatchDecodeWithPagedKVCacheWrapper(workspace, layout, backend="flash_attn")
                w.plan(indptr, indices, last, batch.hq, batch.hkv, batch.d, batch.bs, **common)
            else:
                w = flashinfer_compat.BatchPrefillWithPagedKVCacheWrapper(workspace, layout, backend="flash_attn")
                w.plan(batch.qsl, indptr, indices, last, batch.hq, batch.hkv, batch.d, batch.bs,
                       causal=batch.causal, **common)
            out, lse = w.run(batch.q, physical, return_lse=True, sinks=batch.sinks, k_scale=batch.k_scale,
                             v_scale=batch.v_scale)
            sync()
            ok, err, lse_err, ref = compare(batch, out, (lse * math.log(2.0)).t())
            results.append(dict(case=case["name"], kind=kind, ok=ok, max_abs_err=err, lse_err=lse_err))
            print("flashinfer-style %-7s %-24s %s max_abs_err %.3g lse_err %.3g vs %s" % (
                kind, case["name"], "PASS" if ok else "FAIL", err, lse_err, ref), flush=True)
    report["flashinfer_wrappers"] = results
    return bool(results) and all(r["ok"] for r in results)


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
                                                  dtype=torch.int32), for_cudagraph_capture=True, **plan)

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
    step = _vllm_schedule.find(md, batch.qsl, batch.seqused)
    impl = next(iter(step.layers.values()))[0]
    attn = step.built()[0]
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
             ("flashinfer_wrappers", lambda: flashinfer_wrappers(cases, report)), ("compile", lambda: compiled(report))]
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
