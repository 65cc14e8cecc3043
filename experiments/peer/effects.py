"""Ports of GraphMend's side-effect fixtures: prints, logger calls and raises between tensor
ops (``side_effect*``, ``logger_*``, ``py_side_effect``, ``se_in_helper``,
``region_deco_entry``).

``logger`` (used by ``logger_kwargs.jac``, undefined there) is defined here.
``region_deco_factory.jac`` is not a model: it is the decorator factory that
``region_deco_entry.jac`` imports, ported as the module-level ``phase_wrap`` (its closures
stay nested in it: being nested is what that fixture is about).
"""

from __future__ import annotations

import logging

import torch
from torch import nn

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
