"""Argument checks the drop-ins run before using an argument: each failure is a ValueError that names
the argument, its value and what is allowed (never a broadcast error, IndexError or AttributeError
from deeper down). Only shapes, dtypes and small host arrays are read here."""
import numbers

import numpy as np

FLOAT_DTYPES = ("float32", "float16", "bfloat16")
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2", "uint8")
INDEX_DTYPES = ("int32", "int64")


def dtype_name(dtype):
    """'float16', 'bfloat16', 'int32', ...: the dtype's name in any framework (torch.float16 -> 'float16')."""
    return str(dtype).rsplit(".", 1)[-1]


_SHORT_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "half": "float16", "float": "float32",
                "fp16": "float16", "fp32": "float32"}


def float_dtype(value, name, reason=""):
    """A model dtype (torch/NumPy dtype or name, the library's short names too) as 'float32', 'float16' or
    'bfloat16'; anything else a ValueError (`reason` says why FP8 is not taken here)."""
    named = dtype_name(value)
    named = _SHORT_NAMES.get(named, named)
    if named not in FLOAT_DTYPES:
        raise ValueError("%s = %s (allowed: %s%s)" % (name, named, ", ".join(FLOAT_DTYPES), reason))
    return named


def _describe(value):
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return "%s %s" % (dtype_name(value.dtype), list(value.shape))
    return repr(value) if len(repr(value)) < 60 else type(value).__name__


def array(value, name, rank=None, dtypes=None, shape=None, why=""):
    """`value` as an array argument: not None, an array (PyTorch, NumPy, CuPy), of `rank` and one of
    `dtypes`; the entries of `shape` that are not None must match (`why` says where they come from)."""
    if value is None:
        raise ValueError("%s is None (expected an array)" % name)
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        raise ValueError("%s is %s (expected an array: a PyTorch tensor, NumPy or CuPy array)" % (
            name, _describe(value)))
    if rank is not None and len(value.shape) != rank:
        raise ValueError("%s is %s (expected rank %d)" % (name, _describe(value), rank))
    if dtypes is not None and dtype_name(value.dtype) not in dtypes:
        raise ValueError("%s is %s (allowed dtypes: %s)" % (name, _describe(value), ", ".join(dtypes)))
    if shape is not None:
        want = [None if w is None else int(w) for w in shape]
        if any(w is not None and w != int(g) for w, g in zip(want, value.shape)):
            raise ValueError("%s is %s (expected [%s]%s)" % (
                name, _describe(value), ", ".join("*" if w is None else str(w) for w in want),
                ": " + why if why else ""))
    return value


def integer(value, name, low=None, allowed=None):
    """`value` as a Python int (a bool is refused), at least `low`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError("%s = %r (expected an int%s)" % (name, value, "" if allowed is None else "; " + allowed))
    if low is not None and value < low:
        raise ValueError("%s = %r (allowed: %s)" % (name, value, allowed or "at least %d" % low))
    return int(value)


def positive_scale(value, name, default_text):
    """None, or a positive finite float (the library reads a scale <= 0 as its default: refused, not substituted)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < float("inf"):
        raise ValueError("%s = %r (allowed: None = %s, or a positive number)" % (name, value, default_text))
    return float(value)


def soft_cap(value, name, none_text):
    """None or 0 (no cap) or a positive finite cap (a negative one would silently disable it)."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < float("inf"):
        raise ValueError("%s = %r (allowed: %s, or a positive cap)" % (name, value, none_text))
    return float(value)


def window(value, name="window_size"):
    """(left, right) with -1 unbounded; None = (-1, -1)."""
    if value is None:
        return (-1, -1)
    try:
        left, right = value
    except (TypeError, ValueError):
        raise ValueError("%s = %r (expected (left, right), -1 = unbounded)" % (name, value)) from None
    for side in (left, right):
        if isinstance(side, bool) or not isinstance(side, numbers.Integral) or side < -1:
            raise ValueError("%s = %r (expected two ints >= -1, -1 = unbounded)" % (name, value))
    return (int(left), int(right))


def offsets(host, name, count, total=None, total_name=None):
    """A host offsets array (cu_seqlens_q, indptr): rank 1, `count` + 1 entries, starting at 0,
    non-decreasing, ending at most at `total` rows of `total_name`."""
    values = np.asarray(host)
    if values.ndim != 1 or values.shape[0] != count + 1:
        raise ValueError("%s has shape %s (expected [%d]: one offset per request plus one)" % (
            name, list(values.shape), count + 1))
    if count + 1 and values[0] != 0:
        raise ValueError("%s[0] = %d (expected 0)" % (name, values[0]))
    steps = np.diff(values.astype(np.int64))
    if (steps < 0).any():
        at = int(np.argmax(steps < 0))
        raise ValueError("%s is not non-decreasing: %s[%d] = %d > %s[%d] = %d" % (
            name, name, at, values[at], name, at + 1, values[at + 1]))
    if total is not None and int(values[-1]) > total:
        raise ValueError("%s[-1] = %d but %s has %d rows" % (name, values[-1], total_name, total))
    return values


def lengths(host, name, count):
    """Host per-request lengths (seqused_k, last_page_len): rank 1, at least `count` entries, none negative."""
    values = np.asarray(host)
    if values.ndim != 1 or values.shape[0] < count:
        raise ValueError("%s has shape %s (expected [%d]: one length per request)" % (name, list(values.shape), count))
    values = values[:count]
    if (values < 0).any():
        at = int(np.argmax(values < 0))
        raise ValueError("%s[%d] = %d (expected a length >= 0)" % (name, at, values[at]))
    return values


def block_table(table, name, count, seq_lens, block_size):
    """A [>= count, >= blocks needed] int32 table (the library checks the ids against the cache)."""
    array(table, name, rank=2, dtypes=("int32",))
    if table.shape[0] < count:
        raise ValueError("%s has %d rows (expected one per request: %d)" % (name, table.shape[0], count))
    needed = int(-(-int(np.max(seq_lens, initial=0)) // block_size))
    if table.shape[1] < needed:
        raise ValueError("%s has %d columns; the longest request needs %d blocks of %d tokens" % (
            name, table.shape[1], needed, block_size))
    return table
