"""Ports of GraphMend's branch fixtures: data-dependent ``if``s whose sides assign, return or
call (``where_*``, ``py_where_return``, ``py_callsite_module``, ``cond_assign``,
``call_vs_literal``, ``different_callees``). ``where_common_call``, ``where_multi_stmt`` and
``where_unsafe_setup`` use the ``self_obj`` pattern (see ``common``).

Names these fixtures use but never define (``foo``/``bar``, ``combine``) are defined here;
each one's docstring says what it was given to do.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import RopeConfig, _position_ids_long, _position_ids_short, _short_inv_freq

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
