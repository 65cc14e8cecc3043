"""A module that spells torch otherwise (``import torch as th``, ``from torch import cat,
split``) meets the same rewrites as one that writes ``torch.cat`` (``torch_names.py``): the
names are written ``torch.<name>`` first, and the rewritten function is given the name
``torch`` where its module has none."""

from __future__ import annotations

import ast

import torch
import torch_alias_models as aliased

import stitch
from stitch.synthesize.analysis.context import RewriteContext
from stitch.synthesize.canonicalize.torch_names import torch_spellings


def test_split_map_through_aliases_is_one_graph_for_every_sizes():
    model = aliased.AliasedSplitMap()
    x = torch.randn(10, 3)
    program = stitch.export(model, (x, torch.tensor([4, 6])),
                            examples=[((torch.randn(10, 3), torch.tensor([4, 6])), {})])
    assert program.report.graphs_after == 1, str(program.report)
    assert any("split by sizes from data" in d.reason for d in program.report.decisions)
    for seed, counts in enumerate(([1, 9], [0, 10], [5, 5]), 2):
        args = (torch.randn(10, 3, generator=torch.Generator().manual_seed(seed)),
                torch.tensor(counts))
        torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)


def test_number_list_through_aliases_is_one_graph():
    model = aliased.AliasedNumberList()
    program = stitch.export(model, (torch.randn(3), torch.tensor([[1, 2], [2, 3]])),
                            examples=[((torch.randn(3), torch.tensor([[2, 3], [0, 4]])), {})])
    assert program.report.graphs_after == 1, str(program.report)
    assert any("the list `bounds`" in d.reason for d in program.report.decisions)
    for grid in ([[5, 1], [1, 7]], [[0, 0], [3, 0]], [[7, 2], [2, 2]]):
        args = (torch.randn(3), torch.tensor(grid))
        torch.testing.assert_close(program(*args), model(*args), rtol=0, atol=0)


def _respelled(source: str, **context) -> str:
    func = ast.parse(source).body[0]
    context.setdefault("module_globals", vars(aliased))
    torch_spellings(func, RewriteContext(aliased.__file__, "f", {}, set(), **context))
    return ast.unparse(func)


def test_names_the_function_binds_itself_are_left_alone():
    out = _respelled("def f(x, cat):\n    th = x\n    return cat([th, split(x, 2)[0]])")
    assert out == "def f(x, cat):\n    th = x\n    return cat([th, torch.split(x, 2)[0]])"
    out = _respelled("def f(x):\n    return th.cat([x, x])")
    assert out == "def f(x):\n    return torch.cat([x, x])"


def test_a_name_the_closure_holds_is_the_closures():
    """``make_block(relu)`` called with another function: inside, ``relu`` is the closure's,
    not the module's ``from torch import relu`` (respelled, the program would be wrong)."""
    names = {"torch": torch, "relu": torch.relu, "th": torch}
    source = "def block(x):\n    return relu(x) + th.relu(x)"
    out = _respelled(source, module_globals=names, freevars=frozenset({"relu"}))
    assert out == "def block(x):\n    return relu(x) + torch.relu(x)"
    out = _respelled(source, module_globals=names)
    assert out == "def block(x):\n    return torch.relu(x) + torch.relu(x)"


def test_module_objects_with_their_own_getattr_are_not_read():
    # the module's `cfg` raises KeyError for any attribute (an export crashed on it)
    assert _respelled("def f(x):\n    return th.cat([x])") == "def f(x):\n    return torch.cat([x])"


def test_except_as_names_are_the_functions_own():
    source = ("def f(x):\n    try:\n        return cat([x])\n    except ValueError as cat:\n"
              "        return cat.args")
    assert _respelled(source) == source
