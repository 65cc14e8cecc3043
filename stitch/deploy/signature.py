"""The program's I/O signature as data: names, dtypes, shapes and which dims are dynamic.

Written into the artifact's manifest so a server can describe the model (Triton's input and
output tensors, its batch dimension) without loading compiled code or calling the model.

Names follow Triton's conventions: positional inputs ``INPUT__0``, ``INPUT__1``…, keyword
inputs by their key, outputs ``OUTPUT__0``… or, for a dict-like output, by key.
"""

from __future__ import annotations

import re

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind

from ..number_inputs import NumberInput, number_reads

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def io_signature(exported_program: torch.export.ExportedProgram,
                 numbers: tuple[NumberInput, ...] = ()) -> dict:
    """``{"inputs": [...], "outputs": [...]}`` of the user's inputs and outputs (the epilogue's
    extra outputs are not part of it). ``numbers``: the Python numbers the graph takes as 0-d
    tensors (``number_inputs``), marked ``"number": "float"`` (or int, bool)."""
    ep = exported_program
    nodes = {n.name: n for n in ep.graph.nodes}
    user = [s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    in_tree = pytree.tree_unflatten([nodes[u].meta.get("val") for u in user],
                                    ep.call_spec.in_spec)
    out_node = next(n for n in ep.graph.nodes if n.op == "output")
    out_vals = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a
                for a in out_node.args[0]]
    user_out = pytree.tree_unflatten(out_vals, ep.call_spec.out_spec)[0]  # (out, extras)
    ranges = ep.range_constraints
    inputs = [_spec(_input_name(path, i), path, leaf, ranges)
              for i, (path, leaf) in enumerate(pytree.tree_flatten_with_path(in_tree)[0])]
    taken = number_reads(ep, numbers)
    for spec, param in zip(inputs, user, strict=False):
        if "constant" in spec:
            spec["param"] = param  # the forward's name for it, for messages
        if param in taken:  # a 0-d tensor the model reads as this kind of number
            spec["number"] = taken[param].kind
    out_leaves = pytree.tree_flatten_with_path(user_out)[0]
    outputs = [_spec(_output_name(path, i, len(out_leaves)), path, leaf, ranges)
               for i, (path, leaf) in enumerate(out_leaves)]
    return {"inputs": inputs, "outputs": outputs}


def _input_name(path, index: int) -> str:
    # path = (args-or-kwargs, position-or-key, ...)
    if len(path) == 2 and isinstance(path[0], pytree.SequenceKey):
        if path[0].idx == 0 and isinstance(path[1], pytree.SequenceKey):
            return f"INPUT__{path[1].idx}"
        if path[0].idx == 1 and isinstance(path[1], pytree.MappingKey):
            return _safe(str(path[1].key))
    return f"INPUT__{index}"


def _output_name(path, index: int, count: int) -> str:
    if count == 1 and not path:
        return "OUTPUT__0"
    if len(path) == 1 and isinstance(path[0], pytree.MappingKey | pytree.GetAttrKey):
        key = path[0].key if isinstance(path[0], pytree.MappingKey) else path[0].name
        return _safe(str(key))
    return f"OUTPUT__{index}"


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name) or "_"


def _spec(name: str, path, leaf, ranges) -> dict:
    spec = {"name": name, "path": pytree.keystr(path)}
    if not isinstance(leaf, torch.Tensor):
        spec["constant"] = leaf if isinstance(leaf, int | float | bool | str | None) else repr(leaf)
        return spec
    shape, symbols, dynamic = [], [], {}
    for dim, size in enumerate(leaf.shape):
        if isinstance(size, torch.SymInt):
            expr = size.node.expr
            shape.append(-1)
            symbols.append(str(expr))
            vr = ranges.get(expr)
            dynamic[str(dim)] = [_bound(vr.lower), _bound(vr.upper)] if vr is not None \
                else [None, None]
        else:
            shape.append(int(size))
            symbols.append(None)
    spec.update(dtype=str(leaf.dtype), shape=shape, symbols=symbols, dynamic=dynamic)
    return spec


def _bound(value) -> int | None:
    try:
        return int(value)
    except Exception:  # noqa: BLE001 - unbounded: int(int_oo) raises OverflowError, or
        return None  # AttributeError ('Infinity' has no '_mpf_') with sympy 1.14
