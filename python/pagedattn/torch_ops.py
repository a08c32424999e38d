"""The drop-ins as PyTorch custom ops (``torch.ops.pagedattn.*``) with fake implementations, so
that ``torch.compile`` traces a model calling them without graph breaks.

Needs ``torch.library.custom_op`` and ``register_fake`` (PyTorch 2.4 and newer). On older PyTorch
nothing is registered: ``REGISTERED`` is False and ``REASON`` says why; the functions in
``pagedattn.vllm_compat`` work there all the same.

``flash_attn_varlen`` is functional (it returns out and softmax_lse) and builds the step's metadata
itself from cu_seqlens_q and seqused_k (read on the host). Under a captured CUDA graph use
``vllm_compat.flash_attn_varlen_func`` with ``scheduler_metadata``, built before capture.
"""
from typing import Optional, Tuple

import torch

from . import vllm_compat

REGISTERED = False
REASON = ""

if not (hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_fake")):
    REASON = "torch %s has no torch.library.custom_op / register_fake (2.4+)" % torch.__version__
else:

    @torch.library.custom_op("pagedattn::flash_attn_varlen", mutates_args=())
    def flash_attn_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                          seqused_k: torch.Tensor, block_table: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int,
                          softmax_scale: Optional[float] = None, causal: bool = True, window_left: int = -1,
                          window_right: int = -1, softcap: float = 0.0, alibi_slopes: Optional[torch.Tensor] = None,
                          s_aux: Optional[torch.Tensor] = None, k_descale: Optional[torch.Tensor] = None,
                          v_descale: Optional[torch.Tensor] = None,
                          kv_cache_dtype: str = "auto") -> Tuple[torch.Tensor, torch.Tensor]:
        """flash_attn_varlen_func over the paged cache k/v; returns (out, softmax_lse)."""
        return vllm_compat.flash_attn_varlen_func(
            q, k, v, max_seqlen_q, cu_seqlens_q, max_seqlen_k, seqused_k=seqused_k, softmax_scale=softmax_scale,
            causal=causal, window_size=(window_left, window_right), softcap=softcap, alibi_slopes=alibi_slopes,
            block_table=block_table, return_softmax_lse=True, k_descale=k_descale, v_descale=v_descale, s_aux=s_aux,
            kv_cache_dtype=kv_cache_dtype)

    @flash_attn_varlen.register_fake
    def _flash_attn_varlen_fake(q, k, v, cu_seqlens_q, seqused_k, block_table, max_seqlen_q, max_seqlen_k,
                                softmax_scale=None, causal=True, window_left=-1, window_right=-1, softcap=0.0,
                                alibi_slopes=None, s_aux=None, k_descale=None, v_descale=None, kv_cache_dtype="auto"):
        return torch.empty_like(q), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)

    @torch.library.custom_op("pagedattn::reshape_and_cache_flash", mutates_args=("key_cache", "value_cache"))
    def reshape_and_cache_flash(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                                value_cache: torch.Tensor, slot_mapping: torch.Tensor, kv_cache_dtype: str,
                                k_scale: Optional[torch.Tensor] = None, v_scale: Optional[torch.Tensor] = None) -> None:
        """vllm_compat.reshape_and_cache_flash as an op that mutates the cache."""
        vllm_compat.reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype,
                                            k_scale, v_scale)

    @reshape_and_cache_flash.register_fake
    def _reshape_and_cache_flash_fake(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype,
                                      k_scale=None, v_scale=None):
        return None

    @torch.library.custom_op("pagedattn::merge_attn_states", mutates_args=("output", "output_lse"))
    def merge_attn_states(output: torch.Tensor, prefix_output: torch.Tensor, prefix_lse: torch.Tensor,
                          suffix_output: torch.Tensor, suffix_lse: torch.Tensor,
                          output_lse: Optional[torch.Tensor] = None) -> None:
        """vllm_compat.merge_attn_states as an op that mutates output (and output_lse)."""
        vllm_compat.merge_attn_states(output, prefix_output, prefix_lse, suffix_output, suffix_lse, output_lse)

    @merge_attn_states.register_fake
    def _merge_attn_states_fake(output, prefix_output, prefix_lse, suffix_output, suffix_lse, output_lse=None):
        return None

    REGISTERED = True
