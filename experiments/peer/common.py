"""Helpers shared by the ``self_obj`` ports of ``guards`` and ``where``.

Fixtures whose first parameter is ``self_obj`` (the Phi-4 longrope ``register_buffer``
pattern of GraphMend's paper, Fig. 4) take a rotary-embedding-like object; the port makes
that object the module itself (``self``), with the attributes the body reads
(``config``, ``rope_init_fn``, ``original_inv_freq``, ``long_inv_freq``, ...) set in
``__init__``. ``device`` is passed as the keyword constant ``device="cpu"``. This module
holds the config object those bodies read and the inputs that take the long and the short
branch.
"""

from __future__ import annotations

import torch

# =====================================================================================
# Shared by the self_obj fixtures (Phi-4 longrope register_buffer pattern)
# =====================================================================================

class RopeConfig:
    """A plain (non-module) config object, as ``self_obj.config`` in the fixtures."""

    def __init__(self, max_position_embeddings=32, original_max_position_embeddings=None,
                 rope_type="default"):
        self.max_position_embeddings = max_position_embeddings
        if original_max_position_embeddings is not None:
            self.original_max_position_embeddings = original_max_position_embeddings
        self.rope_type = rope_type


def _short_inv_freq(n):
    return 1.0 / (10000.0 ** (torch.arange(0, n).float() / n))


def _guard_rope_init(config, device=None):
    """``self_obj.rope_init_fn`` of the guard_* fixtures (opaque there): a pure initializer."""
    t = torch.arange(0, 8).float() * 0.5
    return t if device is None else t.to(device)


def _position_ids_long():
    return torch.arange(12).unsqueeze(0)  # max + 1 = 12 > 8: the long branch


def _position_ids_short():
    return (torch.arange(12) // 2).unsqueeze(0)  # max + 1 = 6 <= 8: the short branch
