"""pagedattn: paged-KV attention backends for LLM serving, from Python.

The engine-level API is the C++ library's (``select_backend``, the KV-cache geometry,
``CommonAttentionMetadata``, a builder's ``build()``, an impl's ``do_kv_cache_update()`` and
``forward()``); arrays cross as DLPack views (PyTorch, NumPy, CuPy), never copied.
``pagedattn.vllm_compat`` has drop-ins with vLLM's signatures, ``pagedattn.flashinfer_compat``
FlashInfer's plan/run wrappers (on the FLASHINFER backend, or another one named); ``pagedattn.torch_ops``
registers the ops with ``torch.library`` (imported here when PyTorch already is).
``build_info()`` says which build this is (commit, CUDA, archs, head sizes, where it came from).
"""
import os
import sys

try:
    import numpy  # noqa: F401  (the drop-ins need it)
except ImportError as error:  # e.g. another python3.11 reading the same user site-packages
    raise ImportError(f"pagedattn needs NumPy, which {sys.executable} does not have; use "
                      "/usr/bin/python3 (Debian's python3-numpy), as README.md says") from error

from . import _C
from ._C import (  # noqa: F401  (the public API)
    AttentionBackend,
    AttentionImpl,
    AttentionMetadata,
    AttentionMetadataBuilder,
    BackendSelection,
    BatchReorder,
    CommonAttentionMetadata,
    DecodePrefillSplit,
    ScheduledRequest,
    __version__,
    backend_priority,
    built_with_cuda,
    cascade_attention_pays_off,
    cuda_archs,
    cuda_devices,
    default_device,
    dequantize_fp8_query,
    find_backend,
    get_kv_cache_layout,
    get_kv_cache_shape,
    get_kv_cache_stride_order,
    head_sizes,
    kv_cache_bytes_per_block,
    kv_cache_storage_dtype,
    kv_cache_strides,
    merge_attn_states,
    registered_backends,
    reorder_batch_to_split_decodes_and_prefills,
    select_backend,
    set_kv_cache_layout,
    split_decodes_and_prefills,
)
from . import flashinfer_compat, vllm_compat  # noqa: F401


def build_info():
    """This build: version, commit (and dirty: the tree had changes), cuda, cuda_archs, head_sizes
    (of the compiled kernels; empty without CUDA), build_type, python, source_dir (the checkout it
    was built from) and package_dir (where it was imported from: tells two installs apart)."""
    info = _C._build_info()
    info["package_dir"] = os.path.dirname(os.path.abspath(__file__))
    return info


if "torch" in sys.modules:
    from . import torch_ops  # noqa: F401
