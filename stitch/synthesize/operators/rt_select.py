"""The traced branch itself: ``torch.where`` over both arms where they agree and are pure,
else ``torch.cond``, traced again on copies where two of its inputs share memory."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable

import torch
import torch.utils._pytree as pytree

from capture import torch_messages as tm
from capture.errors import error_chain

from .rt_lift import lifted
from .rt_raising import NestedDataBranch
from .rt_state import RT, in_traced_body
from .rt_values import same_kind, same_meta_tensors, trace_unaliased


def select(predicate, true_fn, false_fn, operands, mode) -> tuple:
    if RT.raise_probe:  # an arm run to see whether it raises holds a branch on data
        raise NestedDataBranch
    with in_traced_body():
        if mode == "where":
            t, f = true_fn(*operands), false_fn(*operands)
            if all(same_meta_tensors(a, b) for a, b in zip(t, f, strict=True)):
                # a read both arms give as one (``k * 2`` or ``k``) stays marked as a read
                return tuple(same_kind(torch.where(predicate, a, b), a, b)
                             for a, b in zip(t, f, strict=True))
        return _traced_cond(predicate, true_fn, false_fn, operands)


def _traced_cond(predicate, true_fn, false_fn, operands) -> tuple:
    # under Dynamo (the census, a cond nested in an arm) a failed trace is not retried
    before = None if torch.compiler.is_dynamo_compiling() else _TraceState()
    try:
        return tuple(lifted(lambda: trace_unaliased(lambda: torch.cond(
            predicate, true_fn, false_fn, tuple(operands)))))
    except Exception as e:
        if before is not None and unmerged_strides(e):
            # arms whose outputs differ in size (a padded window and its cut): torch.cond
            # gives the output new sizes and must rebuild its strides from them, which it
            # can only where each arm's strides are products of its sizes. Each arm's
            # tensors copied into the contiguous layout are: the same values. What the
            # failed trace decided about sizes (a guard that two arms' strides are equal,
            # sizes no output holds) and the nodes it left are undone first
            before.restore()
            return tuple(lifted(lambda: trace_unaliased(lambda: torch.cond(
                predicate, _dense(true_fn), _dense(false_fn), tuple(operands)))))
        if not tm.matches(tm.COND_INPUT_ALIASING, str(e)):
            raise
    # two inputs of the cond share memory (views of one tensor the branches read through
    # their closure: ``w.chunk(n)``, ``qkv.unbind()``): trace again on copies
    t, f = _own_inputs(true_fn), _own_inputs(false_fn)
    ops = tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in operands)
    return tuple(lifted(lambda: trace_unaliased(lambda: torch.cond(predicate, t, f, ops))))


# where torch.cond builds the strides of an output whose sizes differ between the arms
_STRIDE_MERGE = (os.path.join("_higher_order_ops", "cond.py"), "_bound_stride")


def unmerged_strides(error: BaseException) -> bool:
    """Whether ``error`` (or an error it was raised from) came out of torch.cond's merging
    of the arms' output strides, whatever it says: torch raises a RuntimeError where a
    stride is not a product of sizes, and a KeyError where the two arms write one stride
    as different expressions (``8*Max(1, w)`` and ``32*Max(1, w//4)``)."""
    return any(code.co_filename.endswith(_STRIDE_MERGE[0]) and code.co_name == _STRIDE_MERGE[1]
               for e in error_chain(error)
               for code in (frame.f_code for frame, _ in traceback.walk_tb(e.__traceback__)))


class _TraceState:
    """What the trace knows of its sizes (its guards, the facts they imply, the ranges, the
    substitutions, the checks left for run time, the sizes not yet bound to an output) and
    the nodes its graph holds, as they are now, to put back after a trace that failed: its
    guards would hold the program to the examples' side, and its nodes are dead code."""

    def __init__(self) -> None:
        from torch.fx.experimental.proxy_tensor import get_proxy_mode

        mode = get_proxy_mode()
        self.graph = getattr(getattr(mode, "tracer", None), "graph", None)
        self.last = next(iter(reversed(self.graph.nodes)), None) if self.graph else None
        env = getattr(torch._guards.detect_fake_mode(), "shape_env", None)
        self.env = env
        if env is None:
            return
        self.guards = len(env.guards)
        self.pending = len(env.pending_fresh_unbacked_symbols)
        self.axioms = dict(env.axioms)
        self.ranges = dict(env.var_to_range)
        self.replacements = dict(env.replacements)
        self.asserts = {k: list(v) for k, v in env.deferred_runtime_asserts.items()}
        self.assert_count = getattr(env, "num_deferred_runtime_asserts", None)

    def restore(self) -> None:
        if self.graph is not None and self.last is not None:
            for node in list(reversed(self.graph.nodes)):
                if node is self.last or node.users:
                    break
                self.graph.erase_node(node)
        env = self.env
        if env is None:
            return
        del env.guards[self.guards:]
        del env.pending_fresh_unbacked_symbols[self.pending:]
        for mine, theirs in ((self.axioms, env.axioms), (self.ranges, env.var_to_range),
                             (self.replacements, env.replacements),
                             (self.asserts, env.deferred_runtime_asserts)):
            theirs.clear()
            theirs.update(mine)
        if self.assert_count is not None:
            env.num_deferred_runtime_asserts = self.assert_count
        if hasattr(env, "_update_version_counter"):  # torch's caches of simplified sizes
            env._update_version_counter()


def _dense(fn: Callable) -> Callable:
    """``fn`` with each tensor output of at least one dimension copied into the contiguous
    layout (strides that are products of its sizes); a 0-d tensor (a number read) as it is."""
    def dense(*operands):
        return pytree.tree_map_only(
            torch.Tensor, lambda v: v.clone(memory_format=torch.contiguous_format)
            if v.dim() else v, fn(*operands))
    return dense


def _own_inputs(fn: Callable, seen: dict | None = None) -> Callable:
    """``fn`` reading copies of the tensors its closure holds (also inside lists, tuples and
    dicts, and in the closures of the functions it holds: an arm wrapped to carry numbers
    holds the branch's own function): the branch reads the same values, from memory no
    other input shares."""
    import types

    import torch.utils._pytree as pytree

    seen = {} if seen is None else seen
    if not isinstance(fn, types.FunctionType) or not fn.__closure__:
        return fn
    if id(fn) in seen:  # a function reached again (recursion through its own closure)
        return seen[id(fn)]
    cells = []
    for cell in fn.__closure__:
        try:
            value = cell.cell_contents
        except ValueError:  # an unbound cell stays unbound
            cells.append(cell)
            continue
        if isinstance(value, torch.Tensor | list | tuple | dict):
            value = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), value)
        elif isinstance(value, types.FunctionType):
            seen[id(fn)] = fn  # while its cells are copied
            value = _own_inputs(value, seen)
        cells.append(types.CellType(value))
    own = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                             tuple(cells))
    seen[id(fn)] = own
    return own
