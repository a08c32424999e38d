"""Framework-neutral helpers: where an array lives and how to allocate one like it.

The library never allocates the caller's outputs; the drop-ins do, with the caller's framework
(PyTorch, NumPy or CuPy), found from the array's type without importing any framework.
"""
import contextlib
import functools
import inspect
import sys

_DLPACK_CPU, _DLPACK_CUDA, _DLPACK_CUDA_HOST, _DLPACK_CUDA_MANAGED = 1, 2, 3, 13


def framework(array):
    """'torch', 'numpy' or 'cupy': the package the array's type comes from."""
    return type(array).__module__.split(".", 1)[0]


def device_key(array):
    """A hashable key of the array's device (PyTorch's torch.device, else the DLPack device)."""
    return array.device if framework(array) == "torch" else array.__dlpack_device__()


def device_of(array):
    """'cpu' or 'cuda:N', from the array's DLPack device."""
    kind, index = array.__dlpack_device__()
    if kind in (_DLPACK_CUDA, _DLPACK_CUDA_MANAGED):
        return "cuda:%d" % index
    return "cpu"


def empty(like, shape, float32=False):
    """An uninitialised array of `shape` on like's device, of like's dtype (or float32)."""
    name = framework(like)
    if name == "torch":
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=torch.float32 if float32 else like.dtype, device=like.device)
    xp = sys.modules["cupy" if name == "cupy" else "numpy"]
    return xp.empty(shape, dtype=xp.float32 if float32 else like.dtype)


def step_slots(query_start_loc, seq_lens, block_table, block_size, num_tokens):
    """The slot_mapping of a step whose cache writes happened elsewhere (reshape_and_cache_flash):
    where each new token sits by the block table, -1 for padding tokens, as a host int64 array.
    The metadata's validation checks real tokens against it, so it is the true mapping, not -1s."""
    import numpy

    qsl = numpy.asarray(_host_array(query_start_loc), dtype=numpy.int64)
    seqs = numpy.asarray(_host_array(seq_lens), dtype=numpy.int64)[: len(qsl) - 1]
    table = numpy.asarray(_host_array(block_table))
    slots = numpy.full(num_tokens, -1, dtype=numpy.int64)
    real = int(qsl[-1]) if len(qsl) else 0
    if real == 0:
        return slots
    req = numpy.repeat(numpy.arange(len(seqs)), numpy.diff(qsl))
    pos = seqs[req] - (qsl[req + 1] - numpy.arange(real))
    if table.ndim != 2 or (pos < 0).any() or int(pos.max()) // block_size >= table.shape[1]:
        raise ValueError("block_table %s cannot hold the step's positions (need %d blocks per request "
                         "of %d tokens)" % (tuple(table.shape), int(pos.max()) // block_size + 1, block_size))
    slots[:real] = table[req, pos // block_size].astype(numpy.int64) * block_size + pos % block_size
    return slots


def _host_array(array):
    host = to_host(array)
    return host.numpy() if framework(host) == "torch" else host


def to_host(array):
    """A host copy of a small array (lengths, offsets), for metadata that needs host values.

    On CUDA this waits for the copy, so it is not allowed while a CUDA graph is being captured.
    """
    if device_of(array) == "cpu":
        return array
    name = framework(array)
    if name == "torch":
        torch = sys.modules["torch"]
        if torch.cuda.is_current_stream_capturing():
            raise ValueError(
                "host copies of the step's lengths are needed, and a CUDA graph is being captured: "
                "build the metadata before capture (pass scheduler_metadata=get_scheduler_metadata(...))")
        return array.cpu()
    if name == "cupy":
        return sys.modules["cupy"].asnumpy(array)
    raise ValueError("cannot copy a %s array to the host" % type(array).__name__)


def order_after_build(device, like):
    """Makes the current stream of like's framework (PyTorch or CuPy) wait for the copies a CUDA
    builder queued on the legacy default stream, which non-blocking streams (PyTorch's side streams,
    CuPy's Stream(non_blocking=True)) do not wait for on their own. Queued, not waited for."""
    if not device.startswith("cuda"):
        return
    index = int(device.split(":")[1])
    name = framework(like)
    if name == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(index):
            current = cupy.cuda.get_current_stream()
            if current.ptr != 0:
                event = cupy.cuda.Event(disable_timing=True)
                event.record(cupy.cuda.Stream.null)
                current.wait_event(event)
        return
    torch = sys.modules.get("torch")
    if torch is None:
        return
    current = torch.cuda.current_stream(index)
    default = torch.cuda.default_stream(index)
    if current != default:
        current.wait_stream(default)


def from_host(like, values):
    """A copy of the host NumPy array `values` in like's framework, on like's device."""
    name = framework(like)
    if name == "torch":
        return sys.modules["torch"].from_numpy(values).to(like.device)
    if name == "cupy":
        return sys.modules["cupy"].asarray(values)
    return values


def store_host(dst, values):
    """dst[...] = values (a host NumPy array), in place on dst's device."""
    import numpy

    if framework(dst) == "torch":
        dst.copy_(sys.modules["torch"].from_numpy(numpy.ascontiguousarray(values)))
    else:
        dst[...] = from_host(dst, numpy.ascontiguousarray(values))


def permuted(array, order):
    """A view of `array` with its dims reordered (result dim i is dim order[i])."""
    return array.permute(*order) if framework(array) == "torch" else array.transpose(order)


def scale_in_place(array, factor):
    """array *= factor (a host float), on array's framework and stream."""
    if framework(array) == "torch":
        array.mul_(factor)
    else:
        array *= factor


def store_transposed(dst, src, factor):
    """dst[...] = src.T * factor, on src's framework and stream."""
    if framework(src) == "torch":
        dst.copy_(src.t()).mul_(factor)
    else:
        sys.modules["cupy" if framework(src) == "cupy" else "numpy"].multiply(src.T, factor, out=dst)


def on_callers_stream(fn):
    """fn with its `stream` argument, when given, as PyTorch's (or CuPy's) current stream for the call:
    the drop-in's temporaries (a dequantized query, folded scales, gathered pages) are then allocated
    on that stream and reused only in its order, and the framework ops that make them are queued
    there, ahead of the library's kernels that read them."""
    position = list(inspect.signature(fn).parameters).index("stream")

    @functools.wraps(fn)
    def call(*args, **kwargs):
        stream = kwargs.get("stream", args[position] if len(args) > position else None)
        if stream is None:
            return fn(*args, **kwargs)
        with _as_current_stream(stream, args, kwargs):
            return fn(*args, **kwargs)
    return call


def _as_current_stream(stream, args, kwargs):
    if framework(stream) == "cupy":
        return stream  # a CuPy stream is its own context
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return contextlib.nullcontext()
    if not isinstance(stream, torch.cuda.Stream):
        handle = getattr(stream, "cuda_stream", getattr(stream, "ptr", stream))
        if not isinstance(handle, int):
            return contextlib.nullcontext()  # the library names the bad argument
        arrays = list(args) + list(kwargs.values())
        device = next((a.device for a in arrays if isinstance(a, torch.Tensor) and a.is_cuda), None)
        stream = (torch.cuda.default_stream(device) if handle == 0  # the legacy default stream
                  else torch.cuda.ExternalStream(handle, device=device))
    return torch.cuda.stream(stream)
