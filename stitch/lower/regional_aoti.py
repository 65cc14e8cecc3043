"""A piece of a regionally lowered graph, compiled ahead of time so it loads in a fresh process.

``regional`` compiles pieces with ``torch.compile``, whose result lives in the process that
built it. For an artifact each piece chosen there is built again with AOTInductor: exported
by ``torch.export`` on its first recorded input, every tensor dim ``Dim.AUTO`` (dynamic
unless the piece fixes it; a dim of size 0 or 1 is fixed), then ``aot_compile``. What the
compiled piece was built for is kept as a ``PieceSignature`` (JSON, in the manifest), and
``AotiPiece`` checks every call against it::

    call fits the signature (dtypes, devices, fixed sizes, size ranges,
    one symbol one size, contiguous)            ->  the AOTInductor piece
    it does not                                 ->  the piece as exported (never wrong)

AOTInductor does not check its inputs' sizes, so without that check a call of another size
would run code made for the first one. Its number outputs come back as 0-d tensors and are
turned back into numbers.

Not compiled (the piece runs as exported, with the reason): a piece taking a number or
anything but tensors (AOTInductor takes tensors only), a non-contiguous input, a piece that
writes a buffer or one of its inputs (the AOTInductor copy would write its own copy of the
state), or a size the export makes an expression of others.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import sympy
import torch
import torch.utils._pytree as pytree
from torch.export import Dim
from torch.utils._sympy.numbers import int_oo

from capture.tracing_fixes import lowering_fixes


class NotPackaged(Exception):
    """This piece cannot be compiled ahead of time; the message says why."""


@dataclass(frozen=True)
class PieceSignature:
    """What an AOTInductor piece was compiled for: per tensor input its dtype, device and
    sizes (an int where fixed, a symbol's name where dynamic), each symbol's range (upper
    bound None: unbounded), and the kind of each output leaf."""

    inputs: tuple  # ({"dtype": "torch.float32", "device": "cpu", "shape": [2, "s0"]}, ...)
    ranges: dict  # {"s0": [2, None]}
    outputs: tuple  # ("tensor", "int", ...)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> PieceSignature:
        return cls(tuple(data["inputs"]), dict(data["ranges"]), tuple(data["outputs"]))

    def fits(self, leaves: list) -> bool:
        if len(leaves) != len(self.inputs):
            return False
        sizes: dict[str, int] = {}
        for leaf, want in zip(leaves, self.inputs, strict=True):
            if (not isinstance(leaf, torch.Tensor) or str(leaf.dtype) != want["dtype"]
                    or str(leaf.device) != want["device"] or leaf.dim() != len(want["shape"])
                    or not leaf.is_contiguous()):
                return False
            for got, dim in zip(leaf.shape, want["shape"], strict=True):
                if isinstance(dim, int):
                    if got != dim:
                        return False
                elif sizes.setdefault(dim, got) != got:
                    return False
        for name, size in sizes.items():
            low, high = self.ranges.get(name, (0, None))
            if size < low or (high is not None and size > high):
                return False
        return True


_KINDS = {torch.SymInt: "int", int: "int", torch.SymFloat: "float", float: "float",
          torch.SymBool: "bool", bool: "bool"}
_TO_NUMBER = {"int": int, "float": float, "bool": bool}


class AotiPiece(torch.nn.Module):
    """An AOTInductor piece in place of ``piece``: runs it where a call fits ``signature``,
    ``piece`` itself where not. ``misses`` counts the calls that did not fit."""

    def __init__(self, runner, piece: torch.nn.Module, signature: PieceSignature) -> None:
        super().__init__()
        self.runner, self.piece, self.signature = runner, piece, signature
        self.misses = 0

    def forward(self, *args):
        if not self.signature.fits(pytree.tree_leaves(args)):
            self.misses += 1
            return self.piece(*args)
        out = self.runner(*args)
        leaves, spec = pytree.tree_flatten(out)
        if len(leaves) != len(self.signature.outputs):
            raise RuntimeError(f"the AOTInductor piece gave {len(leaves)} outputs; it was "
                               f"compiled to give {len(self.signature.outputs)}")
        leaves = [_TO_NUMBER[kind](v.item()) if kind in _TO_NUMBER and
                  isinstance(v, torch.Tensor) else v
                  for v, kind in zip(leaves, self.signature.outputs, strict=True)]
        return pytree.tree_unflatten(leaves, spec)


def _auto_dims(args: tuple):
    return pytree.tree_map_only(
        torch.Tensor, lambda t: {i: Dim.AUTO for i in range(t.dim())} or None, args)


def export_piece(piece: torch.nn.Module, calls: list) -> torch.export.ExportedProgram:
    """``piece`` exported on its first recorded call; NotPackaged where it cannot be compiled
    ahead of time (see the module's docstring)."""
    first = tuple(calls[0])
    for args in calls:
        for leaf in pytree.tree_leaves(args):
            if not isinstance(leaf, torch.Tensor):
                raise NotPackaged(f"it takes a {type(leaf).__name__}; AOTInductor takes "
                                  "tensors only")
            if not leaf.is_contiguous():
                raise NotPackaged("it takes a non-contiguous tensor")
    ep = torch.export.export(piece, first, dynamic_shapes=_auto_dims(first), strict=False)
    signature = ep.graph_signature
    if signature.buffers_to_mutate or signature.user_inputs_to_mutate:
        raise NotPackaged("it writes a buffer or an input in place")
    return ep


def signature_of(ep: torch.export.ExportedProgram) -> PieceSignature:
    """What ``ep`` (``export_piece``) takes and gives, as ``AotiPiece`` checks it."""
    user = set(ep.graph_signature.user_inputs)
    inputs = []
    for node in ep.graph.nodes:
        if node.op != "placeholder" or node.name not in user:
            continue
        value = node.meta["val"]
        shape = []
        for size in value.shape:
            expr = size.node.expr if isinstance(size, torch.SymInt) else None
            if expr is None or expr.is_number:
                shape.append(int(size))
            elif expr.is_symbol:
                shape.append(str(expr))
            else:
                raise NotPackaged(f"an input size is the expression {size} of others")
        inputs.append({"dtype": str(value.dtype), "device": str(value.device), "shape": shape})
    named = {dim for spec in inputs for dim in spec["shape"] if isinstance(dim, str)}
    ranges = {}
    for symbol, bounds in ep.range_constraints.items():
        if str(symbol) in named:
            finite = bounds.upper not in (int_oo, sympy.oo)
            ranges[str(symbol)] = [int(bounds.lower), int(bounds.upper) if finite else None]
    values = [n.meta.get("val") if isinstance(n, torch.fx.Node) else n
              for n in ep.graph.output_node().args[0]]
    outputs = tuple("tensor" if isinstance(v, torch.Tensor) else _KINDS.get(type(v), "other")
                    for v in values if v is not None)  # pytree flattens None to nothing
    return PieceSignature(tuple(inputs), ranges, outputs)


def aoti_files(ep: torch.export.ExportedProgram, inductor_configs: dict | None = None) -> list:
    """``ep`` compiled by AOTInductor: the files ``package_pt2`` packs as one model (under
    stitch's lowering fixes, as every build it makes)."""
    args, kwargs = ep.example_inputs
    options = {**(inductor_configs or {}), "aot_inductor.package": True}
    with lowering_fixes():
        return torch._inductor.aot_compile(ep.module(check_guards=False), args, kwargs,
                                           options=options)
