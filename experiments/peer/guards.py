"""Ports of GraphMend's guard fixtures: ``hasattr``-guarded initialization
(``guard_*``, ``hasattr_static``; the ``self_obj`` pattern, see ``common``) and validation
guards that raise (``val_guard*``, ``py_val_guard``, ``nested_guard_in_branch``).

``process`` (called by ``val_guard.jac``, undefined there) is defined here; its docstring
says what it was given to do.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import (
    RopeConfig,
    _guard_rope_init,
    _position_ids_long,
    _position_ids_short,
    _short_inv_freq,
)

# =====================================================================================
# guard_attr_escapes.jac -- hasattr-guarded init whose attribute is also read elsewhere
# =====================================================================================

def peek(self_obj):
    """The other reader of ``long_inv_freq`` in the fixture's module (not called by f)."""
    return hasattr(self_obj, "long_inv_freq")


class GuardAttrEscapes(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = RopeConfig()
        self.rope_init_fn = _guard_rope_init
        self.original_inv_freq = _short_inv_freq(8)
        self.register_buffer("inv_freq", self.original_inv_freq.clone(), persistent=False)

    def forward(self, position_ids, device):
        seq_len = torch.max(position_ids) + 1
        if seq_len > 8:
            if not hasattr(self, "long_inv_freq"):
                self.long_inv_freq = self.rope_init_fn(self.config, device)
            self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
        else:
            self.original_inv_freq = self.original_inv_freq.to(device)
            self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)
        return self.inv_freq


def make_guard_attr_escapes():
    torch.manual_seed(0)
    return (GuardAttrEscapes().eval(), (_position_ids_long(),), {"device": "cpu"},
            [((_position_ids_short(),), {"device": "cpu"})])


# =====================================================================================
# guard_body_effects.jac -- hasattr-guarded init whose body also appends to a list
# =====================================================================================

class GuardBodyEffects(nn.Module):
    def __init__(self):
        super().__init__()
        self.log = []
        self.original_inv_freq = _short_inv_freq(8)
        self.register_buffer("inv_freq", self.original_inv_freq.clone(), persistent=False)

    def build(self):
        return torch.arange(0, 8).float() * 0.25

    def forward(self, position_ids):
        seq_len = torch.max(position_ids) + 1
        if seq_len > 8:
            if not hasattr(self, "cache"):
                self.log.append("init")
                self.cache = self.build()
            self.register_buffer("inv_freq", self.cache, persistent=False)
        else:
            self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)
        return self.inv_freq


def make_guard_body_effects():
    torch.manual_seed(0)
    return (GuardBodyEffects().eval(), (_position_ids_long(),), {},
            [((_position_ids_short(),), {})])


# =====================================================================================
# guard_impure_init.jac -- hasattr-guarded init through a dispatch table with a print
# =====================================================================================

def _compute_clean(config, device, **rope_kwargs):
    return torch.arange(0, 8).float().to(device)


def _compute_dirty(config, device, **rope_kwargs):
    print("initializing")
    return torch.arange(0, 16).float().to(device)


IMPURE_ROPE_INIT_FUNCTIONS = {"clean": _compute_clean, "dirty": _compute_dirty}


class GuardImpureInit(nn.Module):
    """The table entry bound is ``"dirty"`` (the one with the print); ``original_inv_freq``
    (not given by the fixture) has the same length as what it returns."""

    def __init__(self):
        super().__init__()
        self.config = RopeConfig(rope_type="dirty")
        self.rope_init_fn = IMPURE_ROPE_INIT_FUNCTIONS[self.config.rope_type]
        self.original_inv_freq = _short_inv_freq(16)
        self.register_buffer("inv_freq", self.original_inv_freq.clone(), persistent=False)

    def forward(self, position_ids, device):
        seq_len = torch.max(position_ids) + 1
        if seq_len > 8:
            if not hasattr(self, "long_inv_freq"):
                self.long_inv_freq = self.rope_init_fn(self.config, device)
            self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
        else:
            self.original_inv_freq = self.original_inv_freq.to(device)
            self.register_buffer(
                "inv_freq", self.original_inv_freq, persistent=False
            )
        return self.inv_freq


def make_guard_impure_init():
    torch.manual_seed(0)
    return (GuardImpureInit().eval(), (_position_ids_long(),), {"device": "cpu"},
            [((_position_ids_short(),), {"device": "cpu"})])


# =====================================================================================
# guard_key_mismatch.jac -- hasattr key is not the attribute written; counter += 1
# =====================================================================================

class GuardKeyMismatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = RopeConfig()
        self.counter = 0
        self.rope_init_fn = _guard_rope_init
        self.original_inv_freq = _short_inv_freq(8)
        self.register_buffer("inv_freq", self.original_inv_freq.clone(), persistent=False)

    def forward(self, position_ids):
        seq_len = torch.max(position_ids) + 1
        if seq_len > 8:
            if not hasattr(self, "never_set"):
                self.counter = self.counter + 1
                self.long_inv_freq = self.rope_init_fn(self.config)
            self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
        else:
            self.original_inv_freq = self.original_inv_freq.to("cpu")
            self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)
        return self.inv_freq


def make_guard_key_mismatch():
    torch.manual_seed(0)
    return (GuardKeyMismatch().eval(), (_position_ids_long(),), {},
            [((_position_ids_short(),), {})])


# =====================================================================================
# hasattr_static.jac -- hasattr on a non-tensor object: static, no break
# =====================================================================================

class HasattrStatic(nn.Module):
    """``self_obj`` is the module; it has the ``flag`` attribute."""

    def __init__(self):
        super().__init__()
        self.flag = True

    def forward(self, x):
        if hasattr(self, "flag"):
            y = x + 1
        else:
            y = x + 2
        return y


def make_hasattr_static():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    return (HasattrStatic().eval(), (x,), {}, [((torch.randn(4, 8),), {})])


# =====================================================================================
# nested_guard_in_branch.jac -- a validation raise inside a data-dependent branch
# =====================================================================================

class NestedGuardInBranch(nn.Module):
    def forward(self, x, y):
        out = torch.zeros_like(x)
        if x.sum() > 0:
            if not (x == y).all():
                raise ValueError("x and y must match")
            a = x * 2
            out.copy_(a)
        else:
            b = x * 3
            out.copy_(b)
        return out


def make_nested_guard_in_branch():
    torch.manual_seed(0)
    x = torch.randn(4, 8).abs() + 0.1
    # taken branch with a passing guard; then the else branch with x != y (guard dormant)
    return (NestedGuardInBranch().eval(), (x, x.clone()), {},
            [((-x, torch.full((4, 8), 9.0)), {})])


# =====================================================================================
# py_val_guard.py -- tensor-bool validation guard (mask.all())
# =====================================================================================

class PyValGuard(nn.Module):
    def forward(self, x, mask):
        x = torch.relu(x)
        if not mask.all():
            raise ValueError("mask must be all true")
        return torch.sin(x) * 2.0


def _all_true():
    return torch.ones(4, 8, dtype=torch.bool)


def _one_false():
    m = torch.ones(4, 8, dtype=torch.bool)
    m[1, 2] = False
    return m


def make_py_val_guard():
    torch.manual_seed(0)
    return (PyValGuard().eval(), (torch.randn(4, 8), _all_true()), {},
            [((torch.randn(4, 8), _all_true()), {})])


# =====================================================================================
# val_guard.jac -- torch.equal validation guard, then `process`
# =====================================================================================

def process(attention_mask):
    """Undefined in the fixture; given the computation the fixture's later revision puts
    in its place (relu, sin, * 2)."""
    return torch.sin(torch.relu(attention_mask)) * 2.0


class ValGuard(nn.Module):
    def forward(self, attention_mask, expected):
        if not torch.equal(attention_mask, expected):
            raise ValueError("unsupported attention mask")
        return process(attention_mask)


def make_val_guard():
    torch.manual_seed(0)
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    return (ValGuard().eval(), (a, a.clone()), {}, [((b, b.clone()), {})])


# =====================================================================================
# val_guard_all.jac -- tensor-bool validation guard between tensor ops
# =====================================================================================

class ValGuardAll(nn.Module):
    def forward(self, x, mask):
        x = torch.relu(x)
        if not mask.all():
            raise ValueError("mask must be all true")
        return torch.sin(x) * 2.0


def make_val_guard_all():
    torch.manual_seed(0)
    return (ValGuardAll().eval(), (torch.randn(4, 8), _all_true()), {},
            [((torch.randn(4, 8), _all_true()), {})])
