"""FlashInfer's pos_encoding_mode="ROPE_LLAMA", applied before our kernels run: FlashInfer rotates q and
k inside its kernel (query i of a request with qo_len queries and kv_len keys at position
kv_len - qo_len + i, key j at position j); here the same rotation runs with PyTorch on the step's
queries and on the keys gathered for the step, so the output is FlashInfer's."""
import numbers

import numpy as np

from ._arrays import framework

MODES = ("NONE", "ROPE_LLAMA")
DEFAULT_THETA, DEFAULT_SCALE = 1e4, 1.0


def mode(value):
    """pos_encoding_mode checked: 'NONE' or 'ROPE_LLAMA'."""
    if value not in MODES:
        raise ValueError("pos_encoding_mode = %r (allowed: %s; ALiBi is not supported by the FlashInfer drop-in)" % (
            value, ", ".join(repr(m) for m in MODES)))
    return value


def constant(value, name, default):
    """rope_theta / rope_scale: None = FlashInfer's default, else a positive finite number."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < float("inf"):
        raise ValueError("%s = %r (allowed: None = %g, or a positive number)" % (name, value, default))
    return float(value)


def query_positions(qsl, seq_lens):
    """Each query token's position (host int64): kv_len - qo_len + i within its request."""
    query_lens = np.diff(qsl)
    request = np.repeat(np.arange(len(query_lens)), query_lens)
    return seq_lens[request] - query_lens[request] + (np.arange(int(qsl[-1])) - qsl[:-1][request])


class Rotation:
    """Llama RoPE with FlashInfer's constants: dim i < D/2 pairs with i + D/2 at frequency
    (1 / rope_scale) * rope_theta^(-2i / D), in float32, the result in the input's dtype."""

    def __init__(self, theta, scale):
        self.theta, self.scale = theta, scale

    def __call__(self, x, positions):
        """x [T, H, D] (PyTorch) rotated at positions (a [T] int64 array on x's device)."""
        torch = torch_of(x)
        half = x.shape[-1] // 2
        exponent = torch.arange(half, device=x.device, dtype=torch.float32) * (2.0 / x.shape[-1])
        freq = torch.pow(self.theta, -exponent) / self.scale  # a scalar base: no host copy (graph capture)
        angle = positions.to(torch.float32).unsqueeze(1) * freq  # [T, D/2]
        cos, sin = angle.cos().unsqueeze(1), angle.sin().unsqueeze(1)
        first, second = x[..., :half].float(), x[..., half:].float()
        return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1).to(x.dtype)


def torch_of(x):
    """PyTorch, for x a PyTorch tensor; otherwise a ValueError (the rotation is written with PyTorch)."""
    if framework(x) != "torch":
        raise ValueError("pos_encoding_mode = 'ROPE_LLAMA' needs PyTorch tensors (got a %s array; rotate q and k "
                         "before the call, or pass torch tensors)" % framework(x))
    import torch

    return torch
