"""In-graph checks as outputs, for ONNX (which has no assert operator and whose exporter drops
``aten._assert_async`` silently).

A check at the top level becomes a bool output. A check inside a cond branch becomes an
extra output of that branch; the other branch returns ``True`` in that slot (a check in a
branch that did not run holds); the cond gets one more output, read at the level above,
where it is a check again - up to the top, at any depth:

    before:  cond(p, true_fn, false_fn, ops)      true_fn: _assert_async(ok, "msg"); ...
    after:   out = cond(p, true_fn', false_fn', ops)
             true_fn':  return (..., all(ok))     false_fn': return (..., True)
             return (..., out[k])                 # a lifted check, message "msg"

A check inside a ``while_loop`` body is refused (a loop cannot return one per trip).
"""

from __future__ import annotations

import operator

import torch

from .built import BackendUnavailable

ASSERT = torch.ops.aten._assert_async.msg
COND = torch.ops.higher_order.cond
LOOP = torch.ops.higher_order.while_loop


def _fake(gm: torch.fx.GraphModule):
    vals = [n.meta["val"] for n in gm.graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)]
    return torch._guards.detect_fake_mode(vals)


def _bool_scalar(gm: torch.fx.GraphModule):
    mode = _fake(gm)
    if mode is None:
        return None
    with mode:
        return torch.ones((), dtype=torch.bool)


def _add(gm, before, target, args, val):
    with gm.graph.inserting_before(before):
        node = gm.graph.call_function(target, args)
    node.meta["val"] = val
    return node


def pending_checks(gm: torch.fx.GraphModule) -> list[tuple[torch.fx.Node, str]]:
    """Remove every check in ``gm`` and below; returns (0-d bool node in ``gm``, message) for
    each, in order. Branch subgraphs gain outputs; their conds gain getitems."""
    found: list[tuple[torch.fx.Node, str]] = []
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is ASSERT:
            flag = _add(gm, node, torch.ops.aten.all.default, (node.args[0],),
                        _bool_scalar(gm))
            found.append((flag, str(node.args[1])))
            gm.graph.erase_node(node)
        elif node.target is LOOP:
            for ref in node.args[:2]:
                body = getattr(gm, ref.target)
                if any(n.target is ASSERT for m in body.modules()
                       if isinstance(m, torch.fx.GraphModule) for n in m.graph.nodes):
                    raise BackendUnavailable(
                        "a check inside a while_loop body; ONNX has no assert operator and a "
                        "loop cannot return one check per trip")
        elif node.target is COND:
            found += _lift_from_branches(gm, node)
    return found


def _lift_from_branches(gm: torch.fx.GraphModule, node: torch.fx.Node) -> list:
    true_gm, false_gm = getattr(gm, node.args[1].target), getattr(gm, node.args[2].target)
    inner_true, inner_false = pending_checks(true_gm), pending_checks(false_gm)
    if not inner_true and not inner_false:
        return []
    _extend_outputs(true_gm, [f for f, _ in inner_true], len(inner_false), after=False)
    _extend_outputs(false_gm, [f for f, _ in inner_false], len(inner_true), after=True)
    vals = node.meta.get("val")
    scalar = _bool_scalar(gm)
    count = len(vals) if isinstance(vals, list | tuple) else None
    if count is None:
        raise BackendUnavailable("a cond without per-output metadata; checks inside it "
                                 "cannot be lifted for ONNX")
    extra = len(inner_true) + len(inner_false)
    node.meta["val"] = type(vals)([*vals, *([scalar] * extra)]) if isinstance(vals, tuple) \
        else [*vals, *([scalar] * extra)]
    found = []
    anchor = node.next
    messages = [m for _, m in inner_true] + [m for _, m in inner_false]
    for k, message in enumerate(messages):
        item = _add(gm, anchor, operator.getitem, (node, count + k), scalar)
        found.append((item, message))
    return found


def _extend_outputs(gm: torch.fx.GraphModule, flags: list, others: int, after: bool) -> None:
    """Append this branch's check flags and ``others`` True constants (the other branch's
    slots) to its outputs: own flags first for the true branch, after for the false one."""
    output = next(n for n in gm.graph.nodes if n.op == "output")
    ones = [_add(gm, output, torch.ops.aten.ones.default, ([],),
                 _bool_scalar(gm)) for _ in range(others)]
    for one in ones:
        one.kwargs = {"dtype": torch.bool}
    extra = [*ones, *flags] if after else [*flags, *ones]
    results = output.args[0]
    output.args = ((*results, *extra),) if isinstance(results, tuple | list) else \
        ((results, *extra),)
    gm.recompile()
