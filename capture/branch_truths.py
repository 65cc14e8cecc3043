"""The symbolic truth of a cond's predicate tensor: a 0-d bool tensor made from a SymBool
(a test of sizes), found through the graph node it came from, or noted when it was made.

``branch_asserts.py`` reads it to keep an arm's assertions to that arm; forced-side
verification (stitch/verify/forced.py) to know a side no input of the example's sizes takes.
A truth combined of others (``if h != s or w != s:``: ``logical_or`` of two tests) is their
combination; a predicate computed from data has none. A predicate that joins a test of sizes
with data (``while x.shape[0] > 3 and k < 3:``, ``k`` a carried tensor) has no truth, but a
side of it may still need one of sizes (``needed_of_node``: the true side needs
``x.shape[0] > 3``).
"""

from __future__ import annotations

import operator
import weakref

import sympy
import torch

_KNOWN: dict[int, tuple[weakref.ref, sympy.Basic]] = {}  # id(fake tensor) -> its truth


def note_predicate(tensor: torch.Tensor, truth) -> torch.Tensor:
    """Remember that ``tensor`` (a 0-d bool tensor a cond will take) holds ``truth``: a
    SymBool, or another tensor noted so (a copy of the predicate). A cond traced later from
    it as a graph input (torch.export compiles each cond on its own) has no node to read."""
    if torch.compiler.is_dynamo_compiling():  # traced: the graph itself says (a node)
        return tensor
    if isinstance(truth, torch.SymBool):
        remember_truth(tensor, unless_constant(truth.node.expr))
    elif isinstance(truth, torch.Tensor):
        remember_truth(tensor, known_truth(truth))
    return tensor


def remember_truth(tensor, expr: sympy.Basic | None) -> sympy.Basic | None:
    """Note a predicate tensor's truth, found from its graph node, for a later run of the
    same cond on fake tensors (``cond_fake_tensor_mode``), where no node is at hand."""
    if expr is not None and isinstance(tensor, torch.Tensor):
        for key in [k for k, (ref, _) in _KNOWN.items() if ref() is None]:
            del _KNOWN[key]
        _KNOWN[id(tensor)] = (weakref.ref(tensor), expr)
    return expr


def known_truth(tensor) -> sympy.Basic | None:
    ref, expr = _KNOWN.get(id(tensor), (None, None))
    return expr if ref is not None and ref() is tensor else None


# ops whose 0-d result has the truth of one of their arguments (which one)
_SAME_TRUTH = {"full": 1, "scalar_tensor": 0, "branch_site": 0, "clone": 0, "alias": 0,
               "view": 0, "reshape": 0, "_to_copy": 0, "to": 0, "bool": 0,
               "lift_fresh_copy": 0}

# reductions of a stack of 0-d truths (``any(s % 2 for s in x.shape[-2:])`` in a test on
# sizes: stitch stacks each size's truth, rt_truths.truth_of)
_REDUCED = {"any": sympy.Or, "all": sympy.And}

# ops of 0-d bool tensors whose truth combines their arguments' (the function, how many)
_COMBINED = {"logical_or": (sympy.Or, 2), "logical_and": (sympy.And, 2),
             "bitwise_or": (sympy.Or, 2), "bitwise_and": (sympy.And, 2),
             "logical_not": (sympy.Not, 1), "bitwise_not": (sympy.Not, 1)}


def unless_constant(expr: sympy.Basic) -> sympy.Basic | None:
    """A condition with no symbol is no evidence about which arm runs (a folded one can be
    wrong, see below): not used."""
    return expr if getattr(expr, "free_symbols", None) else None


def _is_symbool(node) -> bool:
    return isinstance(node, torch.fx.Node) and isinstance(
        node.meta.get("example_value", node.meta.get("val")), torch.SymBool)


def truth_of_node(node, depth: int = 0) -> sympy.Basic | None:
    """The symbolic truth of a graph value: a SymBool, or a tensor made from one."""
    if not isinstance(node, torch.fx.Node) or depth > 6:
        return None
    if node.target in (operator.ne, operator.eq) and len(node.args) == 2 \
            and _is_symbool(node.args[0]) and node.args[1] in (0, False):
        # `b != 0` of a SymBool b (Dynamo's trace of `value != 0`): sympy folds
        # Ne(b, 0) to true, the truth is b's
        inner = truth_of_node(node.args[0], depth + 1)
        return inner if node.target is operator.ne or inner is None else sympy.Not(inner)
    value = node.meta.get("example_value", node.meta.get("val"))
    if isinstance(value, torch.SymBool):
        return unless_constant(value.node.expr)
    if node.op == "placeholder":  # a graph input: the tensor it was made from, if noted
        known = known_truth(getattr(node.meta.get("grapharg"), "example", None))
        return known if known is not None else known_truth(value)
    if node.op not in ("call_function", "call_method"):
        return None
    name = getattr(node.target, "__name__", str(node.target)).split(".")[0]
    reduce = _REDUCED.get(name)
    if reduce is not None and len(node.args) == 1:  # any/all of a stack of truths
        parts = _stacked(node.args[0])
        parts = None if parts is None else [truth_of_node(a, depth + 1) for a in parts]
        return None if not parts or None in parts else unless_constant(reduce(*parts))
    if node.op != "call_function":
        return None
    combine = _COMBINED.get(name)
    if combine is not None:  # ``h != s or w != s``: the truths of its parts, combined
        parts = [truth_of_node(a, depth + 1) for a in node.args[:combine[1]]]
        return None if None in parts else unless_constant(combine[0](*parts))
    index = _SAME_TRUTH.get(name)
    if index is None or len(node.args) <= index:
        return None
    return truth_of_node(node.args[index], depth + 1)


def _stacked(node) -> list | None:
    """The 0-d values a ``stack`` node stacks, or None."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function" or \
            getattr(node.target, "__name__", "").split(".")[0] != "stack" or not node.args:
        return None
    items = node.args[0]
    return list(items) if isinstance(items, list | tuple) else None


def needed_of_node(node, side: bool, depth: int = 0) -> sympy.Basic | None:
    """A condition on sizes that holds whenever the graph value (a predicate) is ``side``,
    or None where none is known: its truth (or the truth's negation) where that is known;
    through ``not``; for ``a and b`` true (``a or b`` false) what its known parts need,
    for ``a and b`` false (``a or b`` true) what either part needs where both are known."""
    truth = truth_of_node(node, depth)
    if truth is not None:
        return truth if side else sympy.Not(truth)
    if not isinstance(node, torch.fx.Node) or depth > 6 or node.op != "call_function":
        return None
    name = getattr(node.target, "__name__", str(node.target)).split(".")[0]
    combine = _COMBINED.get(name)
    if combine is not None and combine[1] == 1:  # not
        return needed_of_node(node.args[0], not side, depth + 1)
    if combine is not None:
        parts = [needed_of_node(a, side, depth + 1) for a in node.args[:2]]
        every = (combine[0] is sympy.And) == side  # `and` true, `or` false: each part holds
        if every:
            known = [p for p in parts if p is not None]
            return unless_constant(sympy.And(*known)) if known else None
        return None if None in parts else unless_constant(sympy.Or(*parts))
    index = _SAME_TRUTH.get(name)
    if index is None or len(node.args) <= index:
        return None
    return needed_of_node(node.args[index], side, depth + 1)
