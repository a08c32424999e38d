"""Case files run through the C++ tool (`pagedattn check --backend cpu --dump`) and the same step
rebuilt from the dump through the Python API, in NumPy or PyTorch arrays.

The dump holds the step's inputs (queries, new keys/values, the cache after the update, block
table, lengths, slots, scales, sinks, slopes) and the C++ run's output and LSE, so a Python run that
starts from the same cache and writes the same new tokens must give the same bytes.
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import pagedattn as pa

FP8_NAN = 0x7F  # a NaN in both e4m3 and e5m2


def case_files():
    """Every case file of the directories in PAGEDATTN_CASE_DIRS (':'-separated)."""
    files = []
    for folder in os.environ.get("PAGEDATTN_CASE_DIRS", "").split(":"):
        if folder and os.path.isdir(folder):
            files += sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".json"))
    return files


def dump_case(case_file, out_dir):
    """Runs the C++ check with --dump; returns its printed line."""
    cli = os.environ["PAGEDATTN_CLI"]
    done = subprocess.run([cli, "check", case_file, "--backend", "cpu", "--dump", out_dir],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssertionError("pagedattn check %s failed (%d): %s%s" % (case_file, done.returncode, done.stdout,
                                                                      done.stderr))
    return done.stdout.strip()


def write_dumps(folder):
    """Dumps every case into folder/<case name>/, the C++ runs in parallel; returns the names."""
    files = case_files()
    names = [os.path.basename(f)[:-5] for f in files]
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        lines = list(pool.map(lambda f, n: dump_case(f, os.path.join(folder, n)), files, names))
    for line in lines:
        print(line)
    return names


def dumps():
    """(name, Dump) for every case: from PAGEDATTN_CASE_DUMPS (written once by the CTest fixture)
    when set, else dumped now into a temporary folder."""
    folder = os.environ.get("PAGEDATTN_CASE_DUMPS")
    if folder and os.path.isdir(folder):
        names = sorted(n for n in os.listdir(folder) if os.path.exists(os.path.join(folder, n, "meta.json")))
        return [(n, Dump(os.path.join(folder, n))) for n in names]
    folder = tempfile.mkdtemp(prefix="pagedattn_dumps_")
    return [(n, Dump(os.path.join(folder, n))) for n in write_dumps(folder)]


class Dump:
    """One dump directory, as arrays."""

    def __init__(self, folder):
        self.folder = folder
        with open(os.path.join(folder, "meta.json")) as f:
            self.meta = json.load(f)
        self.case = self.meta["case"]

    def load(self, name):
        path = os.path.join(self.folder, name + ".npy")
        return np.load(path) if os.path.exists(path) else None

    @property
    def fp8(self):
        return self.case.get("kv_cache_dtype", "auto").startswith("fp8")


class Frame:
    """Array operations in one framework ('numpy' or 'torch'), so each test runs in either."""

    def __init__(self, name):
        self.name = name
        if name == "torch":
            import torch
            self.torch = torch

    def dtype(self, name):
        if self.name == "numpy":
            return {"f32": np.float32, "f16": np.float16, "u8": np.uint8}[name]
        t = self.torch
        return {"f32": t.float32, "f16": t.float16, "bf16": t.bfloat16, "u8": t.uint8}[name]

    def array(self, values, dtype=None):
        """A copy of the NumPy array `values` (rounded to `dtype`: exact, the dump is already rounded)."""
        if self.name == "numpy":
            return np.ascontiguousarray(values, dtype=None if dtype is None else self.dtype(dtype))
        t = self.torch.from_numpy(np.ascontiguousarray(values))
        return t if dtype is None else t.to(self.dtype(dtype))

    def full(self, shape, value, dtype):
        if self.name == "numpy":
            return np.full(shape, value, dtype=self.dtype(dtype))
        return self.torch.full(shape, value, dtype=self.dtype(dtype))

    def to_numpy(self, array):
        """float32 (or raw uint8) NumPy copy."""
        if self.name == "numpy":
            return array.astype(np.uint8 if array.dtype == np.uint8 else np.float32)
        t = array if array.dtype == self.torch.uint8 else array.float()
        return t.numpy()

    def permute(self, array, order):
        return array.transpose(order) if self.name == "numpy" else array.permute(*order)


def paged_cache(frame, dump, storage):
    """The dumped cache (after the update) in the layout the run used, as `storage` arrays, with the
    new tokens' slots poisoned (NaN) so that the Python update has to write them. Returns
    (physical array, logical view)."""
    values = dump.load("kv_cache_raw") if dump.fp8 else dump.load("kv_cache")
    order = list(pa.get_kv_cache_stride_order(dump.meta["kv_layout"]))
    physical = frame.array(values.transpose(order), storage)
    logical = frame.permute(physical, list(np.argsort(order)))
    bs = dump.case["block_size"]
    for slot in dump.load("slot_mapping"):
        if slot >= 0:
            logical[int(slot) // bs, :, int(slot) % bs] = FP8_NAN if dump.fp8 else float("nan")
    return physical, logical


def impl_and_builder(dump):
    """The selector's backend for the case on the CPU, its impl and builder as the C++ runner makes them."""
    c = dump.case
    kv = c.get("kv_cache_dtype", "auto")
    window = c.get("sliding_window")
    selection = pa.select_backend(
        head_size=c["head_size"], num_heads=c["num_heads"], num_kv_heads=c["num_kv_heads"], dtype=c["dtype"],
        kv_cache_dtype=kv, block_size=c["block_size"], has_sinks=bool(c.get("sinks")),
        use_alibi=bool(c.get("alibi")), use_sliding_window=window is not None and tuple(window) != (-1, -1),
        use_soft_cap=bool(c.get("logits_soft_cap")), causal=c.get("causal", True),
        use_per_head_quant_scales=kv.startswith("fp8") and c.get("kv_scale") == "head", device="cpu")
    backend = selection.backend
    slopes, sinks = dump.load("alibi_slopes"), dump.load("sinks")
    impl = backend.make_impl(
        num_heads=c["num_heads"], head_size=c["head_size"], num_kv_heads=c["num_kv_heads"],
        scale=dump.meta["scale"], dtype=c["dtype"], alibi_slopes=slopes, sliding_window=window, kv_cache_dtype=kv,
        logits_soft_cap=c.get("logits_soft_cap"), sinks=sinks, kv_layout=dump.meta["kv_layout"], device="cpu")
    seq_lens = c["seq_lens"]
    builder = backend.make_builder(
        num_heads=c["num_heads"], num_kv_heads=c["num_kv_heads"], head_size=c["head_size"],
        block_size=c["block_size"], dtype=c["dtype"], kv_cache_dtype=kv,
        device="cpu", max_num_reqs=max(256, len(seq_lens)), max_num_tokens=max(8192, sum(c["query_lens"])),
        max_model_len=max([32768] + seq_lens), use_alibi=bool(c.get("alibi")), sliding_window=window)
    return selection, impl, builder


def common_metadata(frame, dump):
    c = dump.case
    qsl, seq_lens = frame.array(dump.load("query_start_loc")), frame.array(dump.load("seq_lens"))
    return pa.CommonAttentionMetadata(
        query_start_loc=qsl, seq_lens=seq_lens, block_table_tensor=frame.array(dump.load("block_table")),
        slot_mapping=frame.array(dump.load("slot_mapping")), num_reqs=len(c["seq_lens"]),
        num_actual_tokens=sum(c["query_lens"]), max_query_len=max(c["query_lens"]), max_seq_len=max(c["seq_lens"]),
        causal=c.get("causal", True))


def run_step(frame, dump):
    """The engine step through the Python API; returns the cache (logical, NumPy), output and LSE."""
    c = dump.case
    storage = "u8" if dump.fp8 else c["dtype"]
    _, cache = paged_cache(frame, dump, storage)
    selection, impl, builder = impl_and_builder(dump)
    k_scale, v_scale = dump.load("k_scale"), dump.load("v_scale")
    k_scale = None if k_scale is None else frame.array(k_scale)
    v_scale = None if v_scale is None else frame.array(v_scale)
    key, value = frame.array(dump.load("key"), c["dtype"]), frame.array(dump.load("value"), c["dtype"])
    meta = common_metadata(frame, dump)
    impl.do_kv_cache_update(key, value, cache, meta.slot_mapping, k_scale, v_scale)
    attn_metadata = builder.build(dump.meta["cascade_prefix_len"], meta)
    query = frame.array(dump.load("query"), c["dtype"])
    tokens = sum(c["query_lens"])
    output = frame.full((tokens, c["num_heads"], c["head_size"]), float("nan"), c["dtype"])
    lse = frame.full((c["num_heads"], tokens), float("nan"), "f32")
    impl.forward(query, key, value, cache, attn_metadata, output, lse, k_scale, v_scale)
    return selection, frame.to_numpy(cache), frame.to_numpy(output), frame.to_numpy(lse)


if __name__ == "__main__":
    os.makedirs(sys.argv[1], exist_ok=True)
    print("%d case dumps in %s" % (len(write_dumps(sys.argv[1])), sys.argv[1]))
