"""Every keyword of the drop-ins is honoured or refused, never silently ignored (issue 39), on the CPU
backend against a float64 reference: causal through a schedule, FlashInfer's k_scale / v_scale on
a 16-bit cache, num_splits, deterministic, fa_version, negative scales and caps, the keywords we
cannot honour; and docs/python.md has a row for every keyword of every drop-in's signature."""
import inspect
import math
import os
import re
import unittest
from types import SimpleNamespace
from unittest import mock

import numpy as np

from pagedattn import flashinfer_compat as fi
from pagedattn import _vllm_layers as layers
from pagedattn import vllm_compat as vc

try:
    import torch
except ImportError:
    torch = None

H, HKV, D, BS = 4, 2, 64, 16
DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "python.md")


class Step:
    """A random paged step on the host: requests with context before their queries, random blocks."""

    def __init__(self, seq_lens=(37, 9), query_lens=(6, 9), dtype=np.float32, seed=0):
        rng = np.random.default_rng(seed)
        blocks = [math.ceil(s / BS) for s in seq_lens]
        ids = rng.permutation(sum(blocks) + 3).astype(np.int32)
        self.table = np.zeros((len(seq_lens), max(blocks)), np.int32)
        for r, n in enumerate(blocks):
            self.table[r, :n] = ids[sum(blocks[:r]):sum(blocks[:r]) + n]
        self.cache = rng.standard_normal((len(ids), 2, BS, HKV, D)).astype(dtype)
        self.q = rng.standard_normal((sum(query_lens), H, D)).astype(dtype)
        self.qsl = np.cumsum([0] + list(query_lens)).astype(np.int32)
        self.seq_lens = np.array(seq_lens, np.int32)
        self.query_lens = query_lens

    def reference(self, scale=None, causal=True, softcap=0.0):
        """(out [T, H, D], lse [T, H] natural log) in float64."""
        scale = 1.0 / math.sqrt(D) if scale is None else scale
        out, lse = np.zeros(self.q.shape), np.zeros(self.q.shape[:2])
        for r, (s, n) in enumerate(zip(self.seq_lens, self.query_lens)):
            pos = np.arange(s)
            k = self.cache[self.table[r, pos // BS], 0, pos % BS].astype(np.float64)  # [s, HKV, D]
            v = self.cache[self.table[r, pos // BS], 1, pos % BS].astype(np.float64)
            for i in range(n):
                t = self.qsl[r] + i
                for h in range(H):
                    logits = scale * (k[:, h // (H // HKV)] @ self.q[t, h].astype(np.float64))
                    if softcap:
                        logits = softcap * np.tanh(logits / softcap)
                    if causal:
                        logits[pos > s - n + i] = -np.inf
                    top = logits.max()
                    p = np.exp(logits - top)
                    out[t, h] = p @ v[:, h // (H // HKV)] / p.sum()
                    lse[t, h] = top + math.log(p.sum())
        return out, lse

    def flash_attn(self, **kwargs):
        """vllm_compat.flash_attn_varlen_func over this step (the cache's K and V halves)."""
        return vc.flash_attn_varlen_func(self.q, self.cache[:, 0], self.cache[:, 1], max(self.query_lens), self.qsl,
                                         int(self.seq_lens.max()), seqused_k=self.seq_lens, block_table=self.table,
                                         **kwargs)

    def schedule(self, **kwargs):
        return vc.get_scheduler_metadata(len(self.seq_lens), max(self.query_lens), int(self.seq_lens.max()), H, HKV, D,
                                         self.seq_lens, qkv_dtype=self.q.dtype, cu_seqlens_q=self.qsl, page_size=BS,
                                         block_table=self.table, **kwargs)

    def page_table(self):
        """FlashInfer's (indptr, indices, last_page_len)."""
        pages = [math.ceil(s / BS) for s in self.seq_lens]
        indptr = np.cumsum([0] + pages).astype(np.int32)
        indices = np.concatenate([self.table[r, :n] for r, n in enumerate(pages)]).astype(np.int32)
        last = np.array([s - (n - 1) * BS for s, n in zip(self.seq_lens, pages)], np.int32)
        return indptr, indices, last

    def prefill_wrapper(self, **plan):
        wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(np.zeros(16, np.uint8), backend="cpu")
        wrapper.plan(self.qsl, *self.page_table(), H, HKV, D, BS, causal=True,
                     q_data_type={np.float32: "float32", np.float16: "float16"}[self.q.dtype.type], **plan)
        return wrapper


def assert_close(test, got, want, tol):
    test.assertLess(float(np.abs(np.asarray(got, np.float64) - want).max()), tol)


class CausalThroughASchedule(unittest.TestCase):
    def test_a_schedule_for_the_other_mask_is_refused(self):
        step = Step()
        schedule = step.schedule()  # get_scheduler_metadata's causal=False (vLLM's default)
        with self.assertRaisesRegex(ValueError, r"causal=True but the scheduler_metadata was built with causal=False"):
            step.flash_attn(causal=True, scheduler_metadata=schedule)
        with self.assertRaisesRegex(ValueError, r"causal=False but the scheduler_metadata was built with causal=True"):
            step.flash_attn(causal=False, scheduler_metadata=step.schedule(causal=True))

    def test_the_schedule_for_the_same_mask_gives_it(self):
        step = Step()
        for causal in (False, True):
            want, _ = step.reference(causal=causal)
            assert_close(self, step.flash_attn(causal=causal, scheduler_metadata=step.schedule(causal=causal)), want,
                         1e-4)
            assert_close(self, step.flash_attn(causal=causal), want, 1e-4)
        self.assertGreater(np.abs(step.reference(causal=True)[0] - step.reference(causal=False)[0]).max(), 0.1)


class FlashInferScales(unittest.TestCase):
    """FlashInfer applies k_scale / v_scale on every cache dtype: sm_scale *= k_scale, out *= v_scale."""

    def test_16_bit_cache(self):
        step = Step(dtype=np.float16)
        wrapper = step.prefill_wrapper()
        plain = wrapper.run(step.q, step.cache).astype(np.float64)
        out, lse = wrapper.run(step.q, step.cache, k_scale=0.5, v_scale=2.0, return_lse=True)
        want, want_lse = step.reference(scale=0.5 / math.sqrt(D))
        assert_close(self, out, 2.0 * want, 2e-2)
        assert_close(self, lse * math.log(2.0), want_lse, 1e-3)  # the LSE of the folded scale, not of v_scale
        self.assertGreater(np.abs(out - plain).max(), 0.5)
        assert_close(self, plain, step.reference()[0], 1e-2)

    def test_scales_as_arrays(self):
        step = Step(dtype=np.float16)
        wrapper = step.prefill_wrapper(sm_scale=0.1)
        want = wrapper.run(step.q, step.cache, k_scale=0.5, v_scale=2.0)
        arrays = [np.array(0.5, np.float32), np.array([0.5], np.float32)]
        if torch is not None:
            arrays += [torch.tensor(0.5), torch.tensor([0.5])]
        for k_scale in arrays:
            got = wrapper.run(step.q, step.cache, k_scale=k_scale, v_scale=k_scale * 4)
            np.testing.assert_array_equal(got, want, "k_scale as %r" % (k_scale,))
        with self.assertRaisesRegex(ValueError, r"k_scale has 2 elements"):
            wrapper.run(step.q, step.cache, k_scale=np.array([0.5, 0.5], np.float32))
        with self.assertRaisesRegex(ValueError, r"k_scale = -0.5 \(allowed: a positive scale\)"):
            wrapper.run(step.q, step.cache, k_scale=-0.5)


class NumSplitsAndDeterministic(unittest.TestCase):
    def test_cpu_never_splits_so_any_bound_holds(self):
        step = Step()
        want = step.flash_attn(causal=True)
        for n in (1, 2, 32):
            np.testing.assert_array_equal(step.flash_attn(causal=True, num_splits=n), want, "num_splits=%d" % n)
            np.testing.assert_array_equal(
                step.flash_attn(causal=True, num_splits=n, scheduler_metadata=step.schedule(causal=True, num_splits=n)),
                want)
        np.testing.assert_array_equal(step.flash_attn(causal=True, deterministic=True), want)

    def test_bad_bounds_are_refused(self):
        with self.assertRaisesRegex(ValueError, r"num_splits = -1 \(allowed: 0 = the backend's choice"):
            Step().flash_attn(num_splits=-1)
        with self.assertRaisesRegex(ValueError, r"num_splits = 2, but scheduler_metadata was made with num_splits = 1"):
            step = Step()
            step.flash_attn(num_splits=2, scheduler_metadata=step.schedule(num_splits=1))

    def test_deterministic_and_num_splits_reach_the_builder(self):
        made = []
        select = layers.select

        class Recording:  # the backend, with make_builder's keywords recorded
            def __init__(self, backend):
                self.backend = backend

            def __getattr__(self, name):
                return getattr(self.backend, name)

            def make_builder(self, **kwargs):
                made.append(kwargs)
                return self.backend.make_builder(**kwargs)

        def recording(*args, **kwargs):
            return SimpleNamespace(backend=Recording(select(*args, **kwargs).backend))

        layers._builders.clear()
        with mock.patch.object(layers, "select", recording):
            step = Step()
            step.flash_attn(causal=True, scheduler_metadata=step.schedule(causal=True, deterministic=True),
                            deterministic=True)
            step.flash_attn(causal=True, num_splits=3)
        self.assertEqual([m["deterministic"] for m in made], [True, False])
        self.assertEqual([m["max_num_splits"] for m in made], [0, 3])  # num_splits is the builder's bound
        self.assertNotIn("causal", made[0])  # the mask is the step's (BuilderParams::causal is read nowhere)

    def test_deterministic_refusals(self):
        step = Step()
        with self.assertRaisesRegex(ValueError, r"deterministic=True but the scheduler_metadata was built with "
                                                r"deterministic=False"):
            step.flash_attn(deterministic=True, scheduler_metadata=step.schedule())
        layers.check_deterministic(True, "FLASH_ATTN", 0)  # its builder then never splits
        with self.assertRaisesRegex(ValueError, r"deterministic=True cannot be honoured on OTHER"):
            layers.check_deterministic(True, "OTHER", 0)
        with self.assertRaisesRegex(ValueError, r"deterministic=True with common_prefix_len = 16"):
            step.schedule(deterministic=True, common_prefix_len=16)


class FaVersion(unittest.TestCase):
    def test_none_is_the_backends_choice(self):
        step = Step()
        np.testing.assert_array_equal(step.flash_attn(fa_version=None), step.flash_attn())

    def test_others_are_refused(self):
        step = Step()
        with self.assertRaisesRegex(ValueError, r"fa_version = 99 \(allowed: None = the backend's choice, 2, 3\)"):
            step.flash_attn(fa_version=99)
        with self.assertRaisesRegex(ValueError, r"fa_version = 4: FA4 needs Blackwell \(sm_100\); this device is the "
                                                r"CPU \(allowed: None, 2, 3\)"):
            step.flash_attn(fa_version=4)
        for version in (2, 3):  # CPU_ATTN has one kernel family of its own
            with self.assertRaisesRegex(ValueError, r"fa_version = %d: CPU_ATTN has no v%d kernels" % ((version,) * 2)):
                step.flash_attn(fa_version=version)


class ScalesAndCaps(unittest.TestCase):
    def test_negative_or_zero_scales_and_caps_are_refused(self):
        step = Step()
        for scale in (-1.0, 0.0):
            with self.assertRaisesRegex(ValueError, r"softmax_scale = %r \(allowed: None = 1/sqrt\(head_size\), or a "
                                                    r"positive number\)" % scale):
                step.flash_attn(softmax_scale=scale)
        with self.assertRaisesRegex(ValueError, r"softcap = -5 \(allowed: 0 = no cap, or a positive cap\)"):
            step.flash_attn(softcap=-5)
        with self.assertRaisesRegex(ValueError, r"sm_scale = -1.0 \(allowed: None = 1/sqrt\(head_dim\)"):
            step.prefill_wrapper(sm_scale=-1.0)
        with self.assertRaisesRegex(ValueError, r"logits_soft_cap = -5.0 \(allowed: None or 0 = no cap"):
            step.prefill_wrapper(logits_soft_cap=-5.0)

    def test_given_ones_are_honoured(self):
        step = Step()
        assert_close(self, step.flash_attn(causal=True, softmax_scale=0.3, softcap=2.0),
                     step.reference(scale=0.3, softcap=2.0)[0], 1e-4)
        assert_close(self, step.prefill_wrapper().run(step.q, step.cache), step.reference()[0], 1e-4)  # 1/sqrt(D)
        assert_close(self, step.prefill_wrapper(sm_scale=0.3, logits_soft_cap=2.0).run(step.q, step.cache),
                     step.reference(scale=0.3, softcap=2.0)[0], 1e-4)


class KeywordsWeCannotHonour(unittest.TestCase):
    def test_vllm_refusals(self):
        step = Step()
        for kwargs, pattern in [(dict(dropout_p=0.1), "dropout_p = 0.1"), (dict(return_attn_probs=True),
                                                                            "return_attn_probs"),
                                (dict(q_v=step.q), "q_v"), (dict(cp_world_size=2), "cp_world_size = 2"),
                                (dict(cp_rank=1), "cp_rank = 1"), (dict(cp_tot_seqused_k=step.seq_lens),
                                                                   "cp_tot_seqused_k given")]:
            with self.assertRaisesRegex(ValueError, pattern):
                step.flash_attn(**kwargs)
        for kwargs, pattern in [(dict(max_seqlen_k_new=5), r"max_seqlen_k_new = 5: .*\(allowed: 0"),
                                (dict(headdim_v=32), "headdim_v = 32"), (dict(cache_leftpad=step.seq_lens),
                                                                         "cache_leftpad")]:
            with self.assertRaisesRegex(ValueError, pattern):
                step.schedule(**kwargs)

    def test_vllm_keywords_without_effect_in_the_peer(self):
        step = Step()
        want = step.flash_attn(causal=True)
        ones = np.ones((2, HKV), np.float32) * 3  # descales: FA3 reads them only for FP8 inputs
        got = step.flash_attn(causal=True, scheduler_metadata=step.schedule(causal=True, pack_gqa=True, sm_margin=8),
                              q_descale=ones, k_descale=ones, v_descale=ones)
        np.testing.assert_array_equal(got, want)
        # vLLM's cache write reads k_scale / v_scale for FP8 caches only.
        key = np.random.default_rng(1).standard_normal((3, HKV, D)).astype(np.float32)
        caches = []
        for scale in (None, np.array([4.0], np.float32)):
            cache = np.zeros_like(step.cache)
            vc.reshape_and_cache_flash(key, key, cache[:, 0], cache[:, 1], np.array([0, 5, 17], np.int64), "auto",
                                       scale, scale)
            caches.append(cache)
        np.testing.assert_array_equal(caches[0], caches[1])

    def test_flashinfer(self):
        step = Step()
        want = step.prefill_wrapper().run(step.q, step.cache)
        got = step.prefill_wrapper(use_fp16_qk_reduction=False, non_blocking=False, rope_scale=8.0,
                                   rope_theta=5e5).run(step.q, step.cache)
        np.testing.assert_array_equal(got, want)
        with self.assertRaisesRegex(ValueError, r"use_fp16_qk_reduction = True: .*\(allowed: False\)"):
            step.prefill_wrapper(use_fp16_qk_reduction=True)
        with self.assertRaisesRegex(ValueError, "custom_mask"):
            step.prefill_wrapper(custom_mask=np.ones(4, bool))


def drop_ins():
    """{docs section: function} for every public function and wrapper method of the drop-in modules."""
    found = {}
    for name in vc.__all__:
        found["vllm_compat." + name] = getattr(vc, name)
    for name in fi.__all__:
        member = getattr(fi, name)
        if inspect.isfunction(member):
            found["flashinfer_compat." + name] = member
            continue
        for method, fn in inspect.getmembers(member, inspect.isfunction):
            if method == "__init__" or not method.startswith("_"):
                owner = next(c for c in member.__mro__ if method in vars(c))
                # Methods the paged wrappers share live on their base: one section for both.
                section = name if owner is member else "Batch*Wrapper"
                found["flashinfer_compat.%s.%s" % (section, method)] = fn
    return found


def documented():
    """{section: {keyword: status}} from docs/python.md's keyword tables."""
    tables, section = {}, None
    with open(DOCS) as f:
        for line in f:
            heading = re.match(r"#### `([\w.*]+)`", line)
            if heading:
                section = tables.setdefault(heading.group(1), {})
            elif line.startswith("#"):
                section = None
            elif section is not None and line.startswith("| `"):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                for keyword in re.findall(r"`(\w+)`", cells[0]):
                    section[keyword] = cells[2]
    return tables


class KeywordTable(unittest.TestCase):
    def test_every_keyword_has_a_row(self):
        tables = documented()
        functions = drop_ins()
        self.assertGreaterEqual(len(functions), 8)
        for section, fn in functions.items():
            keywords = [p for p in inspect.signature(fn).parameters if p != "self"]
            with self.subTest(function=section):
                self.assertIn(section, tables, "docs/python.md has no table '#### `%s`'" % section)
                missing = [k for k in keywords if k not in tables[section]]
                self.assertEqual(missing, [], "keywords of %s without a row in docs/python.md" % section)
                stale = [k for k in tables[section] if k not in keywords]
                self.assertEqual(stale, [], "rows of %s for keywords it does not have" % section)
                for keyword, status in tables[section].items():
                    self.assertRegex(status, r"^(honoured|accepted-no-effect|refused)"
                                             r"( / (honoured|accepted-no-effect|refused))*$", keyword)
        self.assertEqual(sorted(set(tables) - set(functions)), [], "tables for functions that do not exist")


if __name__ == "__main__":
    unittest.main()
