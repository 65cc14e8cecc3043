"""A scalar read that reaches code through a call no name resolves (a submodule out of a
container, ``super().__call__``, keyword arguments) is followed where a run shows it
going (``reached_helpers.py``); and a rewritten method that calls the module function of
its own name calls that function (``functions.compile_function``)."""

from __future__ import annotations

import sys

import torch

import stitch
from capture.inputs import Example
from stitch.epilogue.entries import NUMBER_KIND
from stitch.synthesize.convert.number_helpers import helper_target
from stitch.synthesize.convert.reached_helpers import reached_helpers


def grouped_sum(src, index, count):
    """torch_geometric's ``scatter`` as it builds its output: the count, a number, in a
    shape tuple."""
    size = src.size()[:0] + (count,) + src.size()[1:]
    return src.new_zeros(size).index_add_(0, index, src)


class Pool(torch.nn.Module):
    def forward(self, x, index, count=None):
        return grouped_sum(x, index, count)


class CallingBase(torch.nn.Module):
    """Reads the number of groups, then goes on through the base's ``__call__`` (which
    runs the subclass's ``forward``), as torch_geometric's aggregations do."""

    def __call__(self, x, index):
        count = int(index.max()) + 1 if index.numel() > 0 else 0
        return super().__call__(x, index=index, count=count)


class SumPool(CallingBase, Pool):
    pass


class Grouped(torch.nn.Module):
    """The read reaches the helper through a submodule taken out of a ModuleList."""

    def __init__(self) -> None:
        super().__init__()
        self.pools = torch.nn.ModuleList([Pool()])
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x, index):
        count = int(index.max()) + 1
        return self.pools[0](self.proj(x), index, count=count)


def _examples():
    g = torch.Generator().manual_seed(0)
    rows = []
    for groups in ((0, 0, 1, 2, 2), (0, 1, 1, 1, 2, 3, 3)):
        index = torch.tensor(groups)
        rows.append(((torch.randn(len(groups), 4, generator=g), index), {}))
    return rows


def test_read_followed_through_a_module_list_into_a_shape():
    torch.manual_seed(0)
    model = Grouped().eval()
    (first, _), *rest = _examples()
    program = stitch.export(model, first, examples=rest)
    assert program.report.graphs_after == 1
    reached = [d for d in program.report.decisions if "a scalar read reaches it" in d.reason]
    assert {d.function for d in reached} >= {"grouped_sum"}
    x, index = torch.randn(9, 4), torch.tensor([0, 1, 2, 3, 4, 5, 5, 6, 6])
    torch.testing.assert_close(program(x, index), model(x, index), rtol=0, atol=0)
    assert program(x, index).shape == (7, 4)


def test_read_followed_through_super_call_into_forward():
    model = SumPool().eval()
    (first, _), *rest = _examples()
    program = stitch.export(model, first, examples=rest)
    assert program.report.graphs_after == 1
    x, index = torch.randn(6, 4), torch.tensor([0, 0, 3, 3, 3, 4])
    torch.testing.assert_close(program(x, index), model(x, index), rtol=0, atol=0)


def scale(x):
    return x * 3


class SameName(torch.nn.Module):
    def scale(self, x):
        if x.sum() > 0:  # a break: this method is rewritten
            return scale(x)  # the module function, not this method
        return -x

    def forward(self, x):
        return self.scale(x)


def test_rewritten_method_calls_the_module_function_of_its_name():
    model = SameName()
    program = stitch.export(model, (torch.ones(3),), examples=[((-torch.ones(3),), {})])
    for x in (torch.ones(3), -torch.ones(3)):
        torch.testing.assert_close(program(x), model(x))


# -- which failure a function a read reached explains ------------------------------------


def widen(x, n):
    """Reached by a read through a list (no name resolves the call)."""
    return x * n


WIDENERS = [widen]


def first_stage(x):
    return x


def first_stage_rewritten(x):
    """What a rewrite makes of ``first_stage``: a read, kept as a marked 0-d tensor, handed
    on to a function found only by running it."""
    n = torch.tensor(2.0)
    setattr(n, NUMBER_KIND, "int")
    return WIDENERS[0](x, n)


class Staged(torch.nn.Module):
    def forward(self, x):
        return first_stage(x)


def _failure(fn):
    try:
        fn()
    except TypeError as e:
        return e
    raise AssertionError("expected a TypeError")


def _elsewhere():
    raise TypeError("a guard in code no read reached")


def test_a_reached_function_explains_only_a_failure_inside_it():
    module = sys.modules[__name__]
    target = helper_target(first_stage, first_stage, module, "first_stage")
    candidate = {target.key: (target, first_stage_rewritten)}
    example = Example((torch.ones(3),), {})
    inside = _failure(lambda: widen("a", object()))  # raised on a line of ``widen``
    elsewhere = _failure(_elsewhere)
    for failed, explains in ((None, True), (inside, True), (elsewhere, False)):
        known: dict = {}
        assert reached_helpers(Staged(), candidate, example, known, failed) is explains
        # the function is known whatever the answer: a later pass rewrites it
        assert [call.target.attr for call in known.values()] == ["widen"]
        assert next(iter(known.values())).params == frozenset({"n"})
    assert module.first_stage is target.base  # the rewrite was undone after each run
