"""The zoo's cases: each pattern model with inputs that drive every side of its breaks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from .patterns import (
    AndOrPredicate,
    AssertFinite,
    BranchOnItem,
    BranchOnTensor,
    BufferInBranch,
    CallsDisabled,
    EarlyExitLayers,
    EarlyReturn,
    EffectsInNestedBranches,
    ElifChain,
    Encoder,
    FlagThenBranch,
    HalveUntilSmall,
    LogWarning,
    NonzeroGather,
    PrintInBranch,
    PrintStats,
    RaiseOnNan,
    ScalarScale,
    TensorCountedLoop,
    WarnsUser,
)


@dataclass(frozen=True)
class Case:
    """A zoo model with inputs: ``args`` plus ``examples`` covering each branch outcome."""

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], list[tuple[tuple, dict]]]  # first is the main example
    kinds: tuple[str, ...]  # the break kinds the model exhibits
    notes: str = ""
    tags: tuple[str, ...] = field(default=())


def _pos_neg(width: int = 16, batch: int = 4):
    def inputs():
        g = torch.Generator().manual_seed(0)
        x = torch.randn(batch, width, generator=g)
        return [((x.abs() + 0.5,), {}), ((-(x.abs()) - 3.0,), {})]
    return inputs


def _both_signs_block(width: int = 16, batch: int = 4):
    """Inputs that send a Block's output mostly positive vs mostly negative."""

    def inputs():
        g = torch.Generator().manual_seed(0)
        x = torch.randn(batch, width, generator=g)
        return [((x,), {}), ((x * 0.0 - 100.0,), {}), ((x * 0.0 + 100.0,), {})]
    return inputs


def _plain(width: int = 16, batch: int = 4):
    def inputs():
        g = torch.Generator().manual_seed(0)
        return [((torch.randn(batch, width, generator=g),), {})]
    return inputs


def _loop_inputs(width: int = 16, batch: int = 4):
    def inputs():
        g = torch.Generator().manual_seed(0)
        x = torch.randn(batch, width, generator=g)
        return [((x, torch.tensor(3)), {}), ((x, torch.tensor(0)), {})]
    return inputs


def _loop_scales(scales, width: int = 16, batch: int = 4):
    """One input scaled several ways: a loop that stops on the data stops at different
    iterations (none included)."""

    def inputs():
        g = torch.Generator().manual_seed(0)
        x = torch.randn(batch, width, generator=g)
        return [((x * s,), {}) for s in scales]
    return inputs


def _seeded(cls):
    def build():
        torch.manual_seed(0)
        return cls().eval()
    return build


CASES: dict[str, Case] = {c.name: c for c in [
    Case("branch_on_item", _seeded(BranchOnItem), _both_signs_block(), ("branch",)),
    Case("branch_on_tensor", _seeded(BranchOnTensor), _both_signs_block(), ("branch",)),
    Case("flag_then_branch", _seeded(FlagThenBranch), _both_signs_block(), ("scalar_read",)),
    Case("print_stats", _seeded(PrintStats), _plain(), ("side_effect",)),
    Case("log_warning", _seeded(LogWarning), _plain(), ("side_effect",)),
    Case("warns_user", _seeded(WarnsUser), _plain(), ("side_effect",)),
    Case("assert_finite", _seeded(AssertFinite), _plain(), ("assert",)),
    Case("raise_on_nan", _seeded(RaiseOnNan), _plain(), ("assert",)),
    Case("tensor_counted_loop", _seeded(TensorCountedLoop), _loop_inputs(), ("loop",)),
    Case("halve_until_small", _seeded(HalveUntilSmall), _loop_scales((1.0, 0.0, 0.2)),
         ("loop",)),
    Case("early_exit_layers", _seeded(EarlyExitLayers), _loop_scales((1.0, 0.0, 2.0)),
         ("branch",)),
    Case("nonzero_gather", _seeded(NonzeroGather), _plain(), ("dynamic_shape",)),
    Case("scalar_scale", _seeded(ScalarScale), _plain(), ("scalar_read",)),
    Case("calls_disabled", _seeded(CallsDisabled), _plain(), ("unsupported_call",)),
    Case("nested_encoder", _seeded(Encoder), _both_signs_block(), ("branch",)),
    Case("elif_chain", _seeded(ElifChain), _both_signs_block(), ("branch",)),
    Case("and_or_predicate", _seeded(AndOrPredicate), _both_signs_block(), ("branch",)),
    Case("early_return", _seeded(EarlyReturn), _both_signs_block(), ("branch",)),
    Case("buffer_in_branch", _seeded(BufferInBranch), _both_signs_block(), ("branch",)),
    Case("print_in_branch", _seeded(PrintInBranch), _both_signs_block(),
         ("branch", "side_effect")),
    Case("effects_in_nested_branches", _seeded(EffectsInNestedBranches),
         _both_signs_block(), ("branch", "side_effect")),
]}


def make(name: str):
    """``(model, args, kwargs, examples)`` for a zoo case: the CLI's factory form."""
    case = CASES[name]
    inputs = case.inputs()
    (args, kwargs), rest = inputs[0], inputs[1:]
    return case.build(), args, kwargs, rest
