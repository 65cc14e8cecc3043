"""GraphMend's rule fixtures, ported to plain Python/PyTorch, measured with stitch.

GraphMend (a peer project, implemented as passes of the Jac compiler) keeps one fixture per
rewrite rule in the public repository ``savini98/jaseci``, folder
``jac/tests/compiler/passes/main/fixtures/graphmend/`` (33 files, ``.jac`` and ``.py``).
This module holds a port of each, written anew in Python: the same data-dependent branches,
prints, logger calls, raises, ``.item()`` reads, helper functions, attribute writes and
decorators as the fixture, so the graph-break pattern is the one GraphMend's tests exercise.

How the ports map the fixtures:

- A fixture is a ``@torch.compile`` function ``f(...)``; its port is an ``nn.Module`` whose
  ``forward`` takes the same parameters and holds the same body, so ``forward`` is the
  compiled entry, as ``f`` was. Functions the fixture calls stay module-level functions.
- Fixtures whose first parameter is ``self_obj`` (the Phi-4 longrope ``register_buffer``
  pattern of GraphMend's paper, Fig. 4) take a rotary-embedding-like object; the port makes
  that object the module itself (``self``), with the attributes the body reads
  (``config``, ``rope_init_fn``, ``original_inv_freq``, ``long_inv_freq``, ...) set in
  ``__init__``. ``device`` is passed as the keyword constant ``device="cpu"``.
- Names a fixture uses but never defines (``foo``/``bar``, ``combine``, ``process``,
  ``logger``) are defined here; each one's docstring says what it was given to do.
- ``region_deco_factory.jac`` is not a model: it is the decorator factory that
  ``region_deco_entry.jac`` imports, ported as the module-level ``phase_wrap`` (its closures
  stay nested in it: being nested is what that fixture is about).

``FIXTURES`` lists ``(name, factory)``; ``factory()`` returns ``(model, args, kwargs,
examples)`` with the model in eval mode, built after ``torch.manual_seed(0)``. Where the
fixture branches on data, the first input and the examples together take both sides.

Run (from the repository root)::

    PYTHONPATH=. .venv/bin/python experiments/peer_fixtures.py            # every fixture
    PYTHONPATH=. .venv/bin/python experiments/peer_fixtures.py where_return cond_assign
    PYTHONPATH=. .venv/bin/python experiments/peer_fixtures.py --jsonl out.jsonl

Each fixture runs in a process of its own (``--one NAME``, 300 s limit): eager check of the
port, ``torch._dynamo.explain`` (graphs and breaks before; also the graph count a counting
backend receives, the metric of the peer's own tests), plain ``torch.export.export``
(non-strict), then ``stitch.export`` and, when it returns a program, a comparison of the
program's outputs (and printed/logged/warned text) with the eager model's. One JSON line
per fixture, then a summary table.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import logging
import os
import subprocess
import sys
import time
import traceback
import warnings

import torch
from torch import nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT_MARK = "@@PEER-FIXTURE-RESULT "
TIMEOUT_S = 300


# =====================================================================================
# call_vs_literal.jac -- one branch value is a call with an effect, the other a literal
# =====================================================================================

def side_effecting(x):
    print("RAN")
    return x * 2


class CallVsLiteral(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            y = side_effecting(x)
        else:
            y = 1.0
        return y


def make_call_vs_literal():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    return (CallVsLiteral().eval(), (x.abs() + 0.1,), {}, [((-(x.abs() + 0.1),), {})])


# =====================================================================================
# cond_assign.jac -- asymmetric branches calling different torch functions
# =====================================================================================

class CondAssign(nn.Module):
    def forward(self, x, y):
        if x.sum() > 0:
            z = torch.relu(x) + y
        else:
            z = torch.sigmoid(y) - x
        return z


def make_cond_assign():
    torch.manual_seed(0)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    return (CondAssign().eval(), (x.abs() + 0.1, y), {}, [((-(x.abs() + 0.1), y * 2), {})])


# =====================================================================================
# different_callees.jac -- branches call different functions, results discarded
# =====================================================================================

def foo(p):
    """Undefined in the fixture (its result is discarded, so it is called for an effect):
    here it prints its argument."""
    print("foo", p)


def bar(q):
    """Undefined in the fixture; the other branch's effect: prints its argument."""
    print("bar", q)


class DifferentCallees(nn.Module):
    def forward(self, x, p, q):
        if x.sum() > 0:
            foo(p)
        else:
            bar(q)
        return x


def make_different_callees():
    torch.manual_seed(0)
    x, p, q = torch.randn(4, 8), torch.randn(2, 3), torch.randn(2, 3)
    return (DifferentCallees().eval(), (x.abs() + 0.1, p, q), {},
            [((-(x.abs() + 0.1), p + 1, q - 1), {})])


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
# logger_forward_hook.py -- logger call inside an nn.Module forward
# =====================================================================================

gm_forward_hook_logger = logging.getLogger("gm_forward_hook")


class LoggerForwardHookNet(nn.Module):
    def forward(self, x):
        x = torch.relu(x)
        gm_forward_hook_logger.warning("GM-FORWARD-HOOK-LOG")
        return torch.sin(x) * 2.0


def make_logger_forward_hook():
    torch.manual_seed(0)
    return (LoggerForwardHookNet().eval(), (torch.randn(4, 8),), {},
            [((torch.randn(4, 8),), {})])


# =====================================================================================
# logger_forward_hook_raises.py -- logger call, then the forward always raises
# =====================================================================================

gm_forward_hook_raises_logger = logging.getLogger("gm_forward_hook_raises")


class LoggerForwardHookRaisesNet(nn.Module):
    def forward(self, x):
        x = torch.relu(x)
        gm_forward_hook_raises_logger.warning("GM-RAISING-FORWARD-LOG")
        raise ValueError("GM-BOOM")


def make_logger_forward_hook_raises():
    torch.manual_seed(0)
    return (LoggerForwardHookRaisesNet().eval(), (torch.randn(4, 8),), {},
            [((torch.randn(4, 8),), {})])


# =====================================================================================
# logger_kwargs.jac -- dotted logger callee with a keyword argument
# =====================================================================================

logger = logging.getLogger("gm_logger_kwargs")  # the fixture's `logger` (undefined there)


class LoggerKwargs(nn.Module):
    def forward(self, x):
        logger.warning("deprecated", stacklevel=2)
        return torch.sin(x)


def make_logger_kwargs():
    torch.manual_seed(0)
    return (LoggerKwargs().eval(), (torch.randn(4, 8),), {}, [((torch.randn(4, 8),), {})])


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
# py_callsite_module.py -- data-dependent return branches in a module forward
# =====================================================================================

class MyModel(nn.Module):
    def forward(self, x):
        x = torch.relu(x)
        if x.sum() > 0:
            return x * 2.0
        else:
            return x * 3.0


def make_py_callsite_module():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    # relu(x) sums > 0 unless x <= 0 everywhere: the second example takes the else side
    return (MyModel().eval(), (x.abs() + 0.1,), {}, [((-(x.abs() + 0.1),), {})])


# =====================================================================================
# py_side_effect.py -- print of a tensor between tensor ops
# =====================================================================================

class PySideEffect(nn.Module):
    def forward(self, x):
        x = torch.relu(x)
        print(x)
        return torch.sin(x) * 2.0


def make_py_side_effect():
    torch.manual_seed(0)
    return (PySideEffect().eval(), (torch.randn(4, 8),), {}, [((torch.randn(4, 8),), {})])


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
# py_where_return.py -- data-dependent return branches
# =====================================================================================

class PyWhereReturn(nn.Module):
    def forward(self, a, b):
        x = a / (torch.abs(a) + 1)
        if b.sum() < 0:
            return x * (b * -1)
        else:
            return x * (b * -2)


def make_py_where_return():
    torch.manual_seed(0)
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    return (PyWhereReturn().eval(), (a, -(b.abs() + 0.1)), {}, [((a, b.abs() + 0.1), {})])


# =====================================================================================
# region_deco_factory.jac (helper) + region_deco_entry.jac (model)
# =====================================================================================

def phase_wrap(inner_forward):
    """Decorator factory: ``wrapper`` calls the sibling closure ``phase_update`` (a branch on
    data and a print); ``phase_orphan`` is a sibling the wrapper never calls."""

    def phase_update(self, x):
        if x.sum() > 0:
            y = x * 2.0
        else:
            y = x * 3.0
        print("PHASE-UPDATE", y)
        return y

    def phase_orphan(self, x):
        if x.sum() > 0:
            y = x * 4.0
        else:
            y = x * 5.0
        print("PHASE-ORPHAN", y)
        return y

    def wrapper(self, x):
        y = phase_update(self, x)
        return inner_forward(self, y)

    return wrapper


class PhaseNet(nn.Module):
    @phase_wrap
    def forward(self, x):
        return torch.relu(x)


def make_region_deco_entry():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    # mixed signs both times (sums about +32 and -32), so relu keeps part of either side
    return (PhaseNet().eval(), (x + 1.0,), {}, [((x - 1.0,), {})])


# =====================================================================================
# se_in_helper.jac -- the print lives in a helper the entry calls
# =====================================================================================

def helper(x):
    y = torch.relu(x)
    print("FROM-HELPER", y)
    return y * 2.0


class SeInHelper(nn.Module):
    def forward(self, x):
        a = helper(x)
        return torch.sin(a)


def make_se_in_helper():
    torch.manual_seed(0)
    return (SeInHelper().eval(), (torch.randn(4, 8),), {}, [((torch.randn(4, 8),), {})])


# =====================================================================================
# side_effect.jac -- print between tensor ops (the version the peer tests drive)
# =====================================================================================

class SideEffect(nn.Module):
    def forward(self, x):
        x = torch.relu(x)
        print(x)
        return torch.sin(x) * 2.0


def make_side_effect():
    torch.manual_seed(0)
    return (SideEffect().eval(), (torch.randn(4, 8),), {}, [((torch.randn(4, 8),), {})])


# =====================================================================================
# side_effect_clone.jac -- printed tensor mutated in place after the print
# =====================================================================================

class SideEffectClone(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        print("snap:", y)
        y.add_(100.0)
        return y


def make_side_effect_clone():
    torch.manual_seed(0)
    return (SideEffectClone().eval(), (torch.randn(4, 8),), {}, [((torch.randn(4, 8),), {})])


# =====================================================================================
# side_effect_early_return.jac -- prints around an early return on a Python bool
# =====================================================================================

class SideEffectEarlyReturn(nn.Module):
    def forward(self, x, flag: bool):
        print("a")
        if flag:
            print("b")
            return x
        return torch.sin(x)


def make_side_effect_early_return():
    torch.manual_seed(0)
    # `flag` is a Python bool (a constant to torch.export, not data), so it is not a
    # data-dependent branch: both inputs pass False, the path that reaches the compute.
    # (An example with flag=True next to flag=False is refused by stitch's verification:
    # the program is specialised on the first input's constant.)
    return (SideEffectEarlyReturn().eval(), (torch.randn(4, 8), False), {},
            [((torch.randn(4, 8), False), {})])


# =====================================================================================
# side_effect_logger.jac -- logger call between tensor ops
# =====================================================================================

log = logging.getLogger("graphmend_demo")


class SideEffectLogger(nn.Module):
    def forward(self, x):
        x = torch.relu(x)
        log.warning("deprecated path")
        return torch.sin(x)


def make_side_effect_logger():
    torch.manual_seed(0)
    return (SideEffectLogger().eval(), (torch.randn(4, 8),), {}, [((torch.randn(4, 8),), {})])


# =====================================================================================
# side_effect_raises.jac -- print, then the function always raises
# =====================================================================================

class SideEffectRaises(nn.Module):
    def forward(self, x):
        x = torch.relu(x)
        print("GM-SE-BEFORE-RAISE")
        raise ValueError("GM-SE-BOOM")


def make_side_effect_raises():
    torch.manual_seed(0)
    return (SideEffectRaises().eval(), (torch.randn(4, 8),), {}, [((torch.randn(4, 8),), {})])


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


# =====================================================================================
# where_assign.jac -- both branches assign the same variable
# =====================================================================================

class WhereAssign(nn.Module):
    def forward(self, x, y):
        if x.sum() > 10:
            z = x + y
        else:
            z = x * y
        return z


def make_where_assign():
    torch.manual_seed(0)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    return (WhereAssign().eval(), (x.abs() + 1.0, y), {}, [((-(x.abs() + 1.0), y), {})])


# =====================================================================================
# where_common_call.jac -- both branches call register_buffer with a different tensor
# =====================================================================================

class WhereCommonCall(nn.Module):
    def __init__(self):
        super().__init__()
        self.original_inv_freq = _short_inv_freq(8)
        self.long_inv_freq = _short_inv_freq(8) * 0.25
        self.register_buffer("inv_freq", self.original_inv_freq.clone(), persistent=False)

    def forward(self, position_ids):
        seq_len = torch.max(position_ids) + 1
        if seq_len > 8:
            self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
        else:
            self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)
        return self.inv_freq


def make_where_common_call():
    torch.manual_seed(0)
    return (WhereCommonCall().eval(), (_position_ids_long(),), {},
            [((_position_ids_short(),), {})])


# =====================================================================================
# where_item_return.jac -- .item() read decides which input is returned
# =====================================================================================

class WhereItemReturn(nn.Module):
    def forward(self, x, m, n):
        if x.item() > 5:
            return m
        else:
            return n


def make_where_item_return():
    torch.manual_seed(0)
    m, n = torch.randn(4, 8), torch.randn(4, 8)
    return (WhereItemReturn().eval(), (torch.tensor([7.0]), m, n), {},
            [((torch.tensor([2.0]), m * 2, n * 2), {})])


# =====================================================================================
# where_multi_arg.jac -- same callee, two differing positional args, a kwarg; argmax signal
# =====================================================================================

def combine(a, b, mode="x"):
    """Undefined in the fixture (result discarded, so it is called for an effect): writes
    into its first argument, as register_buffer writes into the module in
    where_common_call.jac."""
    if mode == "x":
        a.mul_(b)
    else:
        a.add_(b)


class WhereMultiArg(nn.Module):
    def forward(self, t, p1, q1, p2, q2):
        if t.argmax() > 0:
            combine(p1, q1, mode="x")
        else:
            combine(p2, q2, mode="x")
        return t


def make_where_multi_arg():
    torch.manual_seed(0)
    t = torch.randn(8).abs()
    t_pos, t_zero = t.clone(), t.clone()
    t_pos[3] = 10.0   # argmax 3 > 0
    t_zero[0] = 10.0  # argmax 0
    ps = [torch.randn(4, 8) for _ in range(4)]
    return (WhereMultiArg().eval(), (t_pos, *ps), {},
            [((t_zero, *[p + 1 for p in ps]), {})])


# =====================================================================================
# where_multi_stmt.jac -- Phi-4 longrope (paper Fig. 4): setups + shared register_buffer
# =====================================================================================

def _compute_default_rope(config, device, **rope_kwargs):
    if len(rope_kwargs) > 0:
        raise ValueError("Unexpected arguments: `**rope_kwargs` should be unset")
    return torch.arange(0, 8).float().to(device)


def _compute_longrope(config, device, **rope_kwargs):
    if len(rope_kwargs) > 0:
        raise ValueError("Unexpected arguments: `**rope_kwargs` should be unset")
    return torch.arange(0, 16).float().to(device)


ROPE_INIT_FUNCTIONS = {
    "default": _compute_default_rope,
    "longrope": _compute_longrope,
}


class WhereMultiStmt(nn.Module):
    """``rope_init_fn`` bound from the table (``"longrope"``), as HF binds it;
    ``original_inv_freq`` (not given by the fixture) has the long one's length, as in
    HF's Phi-3/Phi-4 where both come from the same initializer."""

    def __init__(self):
        super().__init__()
        self.config = RopeConfig(max_position_embeddings=32,
                                 original_max_position_embeddings=8, rope_type="longrope")
        self.rope_init_fn = ROPE_INIT_FUNCTIONS[self.config.rope_type]
        self.original_inv_freq = _short_inv_freq(16)
        self.register_buffer("inv_freq", self.original_inv_freq.clone(), persistent=False)

    def forward(self, position_ids, device):
        seq_len = torch.max(position_ids) + 1
        if hasattr(self.config, "original_max_position_embeddings"):
            omp = self.config.original_max_position_embeddings
        else:
            omp = self.config.max_position_embeddings
        if seq_len > omp:
            if not hasattr(self, "long_inv_freq"):
                self.long_inv_freq = self.rope_init_fn(self.config, device)
            self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
        else:
            self.original_inv_freq = self.original_inv_freq.to(device)
            self.register_buffer(
                "inv_freq", self.original_inv_freq, persistent=False
            )
        return self.inv_freq


def make_where_multi_stmt():
    torch.manual_seed(0)
    return (WhereMultiStmt().eval(), (_position_ids_long(),), {"device": "cpu"},
            [((_position_ids_short(),), {"device": "cpu"})])


# =====================================================================================
# where_return.jac -- data-dependent return branches (after b is recomputed)
# =====================================================================================

class WhereReturn(nn.Module):
    def forward(self, a, b):
        x = a / (torch.abs(a) + 1)
        b = x * 1.414
        if b.sum() < 0:
            return x * (b * -1)
        else:
            return x * (b * -2)


def make_where_return():
    torch.manual_seed(0)
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    # b is overwritten from a, so a's sign picks the branch
    return (WhereReturn().eval(), (-(a.abs() + 0.1), b), {}, [((a.abs() + 0.1, b), {})])


# =====================================================================================
# where_unsafe_setup.jac -- non-idempotent counter write in one branch's setup
# =====================================================================================

class WhereUnsafeSetup(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.original_inv_freq = _short_inv_freq(8)
        self.long_inv_freq = _short_inv_freq(8) * 0.25
        self.register_buffer("inv_freq", self.original_inv_freq.clone(), persistent=False)

    def forward(self, position_ids):
        seq_len = torch.max(position_ids) + 1
        if seq_len > 8:
            self.calls = self.calls + 1
            self.register_buffer("inv_freq", self.long_inv_freq, persistent=False)
        else:
            self.register_buffer("inv_freq", self.original_inv_freq, persistent=False)
        return self.inv_freq


def make_where_unsafe_setup():
    torch.manual_seed(0)
    return (WhereUnsafeSetup().eval(), (_position_ids_long(),), {},
            [((_position_ids_short(),), {})])


# =====================================================================================
# The list, and what the harness needs to know about some entries
# =====================================================================================

FIXTURES = [
    ("call_vs_literal", make_call_vs_literal),
    ("cond_assign", make_cond_assign),
    ("different_callees", make_different_callees),
    ("guard_attr_escapes", make_guard_attr_escapes),
    ("guard_body_effects", make_guard_body_effects),
    ("guard_impure_init", make_guard_impure_init),
    ("guard_key_mismatch", make_guard_key_mismatch),
    ("hasattr_static", make_hasattr_static),
    ("logger_forward_hook", make_logger_forward_hook),
    ("logger_forward_hook_raises", make_logger_forward_hook_raises),
    ("logger_kwargs", make_logger_kwargs),
    ("nested_guard_in_branch", make_nested_guard_in_branch),
    ("py_callsite_module", make_py_callsite_module),
    ("py_side_effect", make_py_side_effect),
    ("py_val_guard", make_py_val_guard),
    ("py_where_return", make_py_where_return),
    ("region_deco_entry", make_region_deco_entry),  # uses region_deco_factory's phase_wrap
    ("se_in_helper", make_se_in_helper),
    ("side_effect", make_side_effect),
    ("side_effect_clone", make_side_effect_clone),
    ("side_effect_early_return", make_side_effect_early_return),
    ("side_effect_logger", make_side_effect_logger),
    ("side_effect_raises", make_side_effect_raises),
    ("val_guard", make_val_guard),
    ("val_guard_all", make_val_guard_all),
    ("where_assign", make_where_assign),
    ("where_common_call", make_where_common_call),
    ("where_item_return", make_where_item_return),
    ("where_multi_arg", make_where_multi_arg),
    ("where_multi_stmt", make_where_multi_stmt),
    ("where_return", make_where_return),
    ("where_unsafe_setup", make_where_unsafe_setup),
]

# Fixtures whose forward raises on every input, on purpose: eager raising this is the port
# working, and the program should raise it too.
RAISES_ALWAYS = {
    "logger_forward_hook_raises": (ValueError, "GM-BOOM"),
    "side_effect_raises": (ValueError, "GM-SE-BOOM"),
}


def _failing_guard_inputs():
    """Inputs that fail a fixture's validation guard (not examples: a check, after export,
    that the program raises the model's exception as eager does)."""
    torch.manual_seed(1)
    x = torch.randn(4, 8)
    pos = x.abs() + 0.1
    return {
        "py_val_guard": ((x, _one_false()), {}),
        "val_guard_all": ((x, _one_false()), {}),
        "val_guard": ((x, x + 1.0), {}),
        "nested_guard_in_branch": ((pos, pos + 1.0), {}),  # branch taken, x != y
    }


# =====================================================================================
# Harness
# =====================================================================================

def _short(e: BaseException, n: int = 300) -> str:
    return f"{type(e).__name__}: {str(e).strip()}"[: n + len(type(e).__name__) + 2]


def _tail(e: BaseException, lines: int = 6) -> str:
    tb = traceback.format_exception(type(e), e, e.__traceback__)
    return "".join(tb).strip().splitlines()[-lines:]


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(level=0)
        self.messages = []

    def emit(self, record):
        self.messages.append(f"{record.name}:{record.levelname}:{record.getMessage()}")


def _observe(fn, args, kwargs):
    """Call ``fn`` on copies of the inputs; what it returned or raised, and the text it
    printed, logged and warned."""
    args, kwargs = copy.deepcopy(args), copy.deepcopy(kwargs)
    out, exc = None, None
    records = _Records()
    root = logging.getLogger()
    root.addHandler(records)
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - recorded and compared
                exc = e
    finally:
        root.removeHandler(records)
    return {"out": out, "exc": exc, "stdout": buf.getvalue(), "logs": records.messages,
            "warnings": [str(w.message) for w in caught]}


def _same_result(eager, got) -> tuple[bool, str]:
    if eager["exc"] is not None or got["exc"] is not None:
        if eager["exc"] is None or got["exc"] is None:
            which = eager["exc"] or got["exc"]
            side = "eager" if eager["exc"] is not None else "program"
            return False, f"only {side} raised: {_short(which, 200)}"
        same = (type(eager["exc"]) is type(got["exc"])
                and str(eager["exc"]) == str(got["exc"]))
        return same, ("" if same else f"eager {_short(eager['exc'], 150)} vs program "
                                      f"{_short(got['exc'], 150)}")
    try:
        torch.testing.assert_close(got["out"], eager["out"])
        return True, ""
    except Exception as e:  # noqa: BLE001
        return False, _short(e, 300)


def _same_text(eager, got) -> tuple[bool, str]:
    diffs = [k for k in ("stdout", "logs", "warnings") if eager[k] != got[k]]
    if not diffs:
        return True, ""
    k = diffs[0]
    return False, f"{k}: eager {eager[k]!r:.150} vs program {got[k]!r:.150}"


def run_one(name: str) -> dict:
    import stitch

    factory = dict(FIXTURES)[name]
    rec: dict = {"name": name}
    t0 = time.time()
    model, args, kwargs, examples = factory()

    # 1. the port runs eagerly (on copies), on the first input and every example
    expected_exc = RAISES_ALWAYS.get(name)
    problems = []
    for i, (a, k) in enumerate([(args, kwargs), *examples]):
        seen = _observe(copy.deepcopy(model), a, k)
        if expected_exc is not None:
            e = seen["exc"]
            if not (isinstance(e, expected_exc[0]) and expected_exc[1] in str(e)):
                problems.append(f"input {i}: expected {expected_exc[0].__name__}, got "
                                f"{_short(e, 200) if e else 'no exception'}")
        elif seen["exc"] is not None:
            problems.append(f"input {i}: {_short(seen['exc'], 300)}")
    rec["eager"] = ("port broken: " + "; ".join(problems)) if problems else (
        f"ok (raises {expected_exc[0].__name__} as the fixture does)" if expected_exc else "ok")

    # 2. graphs and breaks under torch.compile
    try:
        torch._dynamo.reset()
        with contextlib.redirect_stdout(io.StringIO()):
            ex = torch._dynamo.explain(copy.deepcopy(model))(
                *copy.deepcopy(args), **copy.deepcopy(kwargs))
        rec["graphs_before"] = ex.graph_count
        rec["breaks_before"] = ex.graph_break_count
        rec["break_reasons"] = [str(r.reason).splitlines()[0][:160] for r in ex.break_reasons]
    except Exception as e:  # noqa: BLE001
        rec["graphs_before"] = rec["breaks_before"] = None
        rec["explain_error"] = _short(e, 300)
    # the peer's own metric: graphs a counting backend receives for one call (its tests
    # note that explain() under-reports for small functions)
    graphs: list = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            torch.compile(copy.deepcopy(model), backend=counting_backend)(
                *copy.deepcopy(args), **copy.deepcopy(kwargs))
    except Exception as e:  # noqa: BLE001 - the raising fixtures raise here too
        rec["backend_call_error"] = _short(e, 200)
    rec["graphs_backend"] = len(graphs)
    torch._dynamo.reset()

    # 3. plain torch.export (non-strict)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            torch.export.export(copy.deepcopy(model), copy.deepcopy(args),
                                copy.deepcopy(kwargs), strict=False)
        rec["torch_export_ok"] = True
    except Exception as e:  # noqa: BLE001
        rec["torch_export_ok"] = False
        rec["torch_export_error"] = _short(e, 300)

    # 4. stitch.export, then the program against the eager model
    reference = copy.deepcopy(model)  # the state stitch starts from
    t1 = time.time()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            program = stitch.export(model, args, kwargs, examples=examples)
    except stitch.StitchError as e:
        rec["stitch"] = "refused: " + _short(e, 300)
        rec["stitch_detail"] = str(e)[:2000]
        program = None
    except Exception as e:  # noqa: BLE001
        if any("raised by the model itself" in n for n in getattr(e, "__notes__", ())):
            # the model fails on its own examples: its exception, passed through with a note
            rec["stitch"] = f"model raises: {type(e).__name__}: {str(e)[:120]} (its own)"
        else:
            rec["stitch"] = "crash: " + " | ".join(_tail(e))
        program = None
    rec["stitch_seconds"] = round(time.time() - t1, 1)
    if program is not None:
        rec["stitch"] = "one graph"
        rec["program_type"] = type(program).__name__
        report = getattr(program, "report", None)
        rec["graphs_after"] = getattr(report, "graphs_after", None)
        if report is not None:
            rec["decisions"] = [f"{d.action.value}: {d.function} {d.reason[:90]}"
                                for d in report.decisions]
            rec["notes"] = [n[:200] for n in report.notes]
        eager = _observe(reference, args, kwargs)
        got = _observe(program, args, kwargs)
        ok, why = _same_result(eager, got)
        rec["outputs_match"] = "pass" if ok else f"fail: {why}"
        ok, why = _same_text(eager, got)
        rec["text_match"] = "pass" if ok else f"fail: {why}"
        failing = _failing_guard_inputs().get(name)
        if failing is not None:
            eager_f = _observe(copy.deepcopy(reference), *failing)
            got_f = _observe(program, *failing)
            ok, why = _same_result(eager_f, got_f)
            rec["failing_guard_input"] = "pass" if ok else f"fail: {why}"
    rec["seconds"] = round(time.time() - t0, 1)
    return rec


def _summary(records: list[dict]) -> str:
    from tabulate import tabulate

    rows = []
    for r in records:
        outcome = r.get("stitch", "?")
        if outcome == "one graph":
            outcome += (f" (graphs_after={r.get('graphs_after')}, outputs "
                        f"{r.get('outputs_match', '?')[:4]}, text {r.get('text_match', '?')[:4]})")
        elif outcome.startswith("crash"):
            outcome = "crash: " + outcome.rsplit(" | ", 1)[-1].strip()
        else:
            outcome = outcome.split("\n")[0]
        rows.append([r["name"], r.get("graphs_before"), r.get("breaks_before"),
                     r.get("graphs_backend"), r.get("torch_export_ok"), outcome[:100],
                     "" if r.get("eager", "ok").startswith("ok") else r.get("eager", "")[:40]])
    return tabulate(rows, headers=["fixture", "graphs before", "breaks before",
                                   "graphs (counting backend)", "torch.export ok",
                                   "stitch outcome", "eager"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="fixtures to run (default: all)")
    ap.add_argument("--one", help="run one fixture in this process (used by the driver)")
    ap.add_argument("--jsonl", help="also write the JSON lines to this file")
    opts = ap.parse_args(argv)

    if opts.one:
        warnings.filterwarnings("ignore")
        rec = run_one(opts.one)
        sys.stdout.flush()
        sys.__stdout__.write(RESULT_MARK + json.dumps(rec) + "\n")
        return 0

    known = [n for n, _ in FIXTURES]
    names = opts.names or known
    unknown = [n for n in names if n not in known]
    if unknown:
        ap.error(f"unknown fixtures: {unknown}; known: {known}")
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    records = []
    sink = open(opts.jsonl, "w") if opts.jsonl else None  # noqa: SIM115
    for name in names:
        t0 = time.time()
        try:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name],
                                  cwd=REPO, env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT_S)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARK)]
            if lines:
                rec = json.loads(lines[-1][len(RESULT_MARK):])
            else:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
                rec = {"name": name, "stitch": f"crash: worker exited {proc.returncode}: "
                                               + " | ".join(tail)}
        except subprocess.TimeoutExpired:
            rec = {"name": name, "stitch": f"crash: timeout after {TIMEOUT_S} s"}
        rec.setdefault("seconds", round(time.time() - t0, 1))
        records.append(rec)
        line = json.dumps(rec)
        print(line, flush=True)
        if sink:
            sink.write(line + "\n")
            sink.flush()
    if sink:
        sink.close()
    print()
    print(_summary(records))
    one = sum(r.get("stitch") == "one graph" for r in records)
    print(f"\n{one} of {len(records)} fixtures: one graph")
    return 0


if __name__ == "__main__":
    sys.exit(main())
