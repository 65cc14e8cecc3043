"""Every branch side of the ONNX graph, checked against the stitched graph.

The examples reach only the sides they take. As ``stitch.export`` forces each cond's
predicate to verify the side the examples miss (``stitch.verify.forced``), this forces the
same cond in both graphs: in the stitched graph module the predicate becomes a constant,
and in the ONNX graph the matching ``If``'s condition becomes a ``Constant``. Both run
every example; the outputs must match. The stitched graph's forced sides were verified
against the model by ``stitch.export``, so the chain ONNX == graph == model holds per side.

Conds are matched to ``If`` nodes by position: the k-th cond of a graph (top level or a
branch body, at any depth) is the k-th ``If`` of the same graph. When the counts differ (an
optimizer folded one) or a cond sits inside a loop body (forcing it is not implemented),
the candidate is refused rather than left unchecked on a side.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from capture import torch_messages as tm

from ..errors import VerificationError
from .compare import max_error
from .float64 import Float64Reference
from .onnx_export import OnnxRefused

COND = torch.ops.higher_order.cond
LOOP = torch.ops.higher_order.while_loop

Address = tuple  # (i0, side0, i1, side1, ..., ik): the k-th cond in its enclosing graph


class WrongSide(VerificationError):
    """The ONNX graph differs from the stitched graph on a forced branch side."""


@dataclass(frozen=True)
class SideCheck:
    """One branch side of one cond, forced in both graphs: on how many examples it ran."""

    address: Address
    side: bool
    examples_run: int
    max_abs_error: float

    @property
    def name(self) -> str:
        parts = [str(self.address[0])]
        for i in range(1, len(self.address), 2):
            parts.append(f"{'then' if self.address[i] else 'else'}.{self.address[i + 1]}")
        return f"cond {'/'.join(parts)} {'true' if self.side else 'false'}"


def fx_conds(gm: torch.fx.GraphModule, prefix: Address = ()) -> dict[Address, torch.fx.Node]:
    found: dict[Address, torch.fx.Node] = {}
    conds = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is COND]
    for k, node in enumerate(conds):
        found[(*prefix, k)] = node
        for side, ref in ((True, node.args[1]), (False, node.args[2])):
            found.update(fx_conds(getattr(gm, ref.target), (*prefix, k, side)))
    return found


def fx_loops_with_conds(gm: torch.fx.GraphModule) -> int:
    count = 0
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op == "call_function" and node.target is LOOP:
                bodies = [getattr(module, a.target) for a in node.args[:2]]
                count += sum(1 for b in bodies for m in b.modules()
                             if isinstance(m, torch.fx.GraphModule)
                             for n in m.graph.nodes if n.target is COND)
    return count


def onnx_ifs(graph, prefix: Address = ()) -> dict[Address, object]:
    found: dict[Address, object] = {}
    ifs = [n for n in graph.node if n.op_type == "If"]
    for k, node in enumerate(ifs):
        found[(*prefix, k)] = node
        branches = {a.name: a.g for a in node.attribute}
        for side, key in ((True, "then_branch"), (False, "else_branch")):
            found.update(onnx_ifs(branches[key], (*prefix, k, side)))
    return found


def _forcing(address: Address, side: bool) -> dict[Address, bool]:
    """The conds to force so that ``address`` runs and takes ``side``: its enclosing ones."""
    force = {}
    for i in range(1, len(address), 2):
        force[address[:i]] = address[i]
    force[address] = side
    return force


def forced_graph_module(module: torch.nn.Module, force: dict[Address, bool]) -> torch.nn.Module:
    module = copy.deepcopy(module)
    conds = fx_conds(module)
    for address, side in force.items():
        node = conds[address]
        owner = node.graph.owning_module
        with node.graph.inserting_before(node):
            value = node.graph.call_function(torch.full, ((), side), {"dtype": torch.bool})
        node.args = (value, *node.args[1:])
        owner.recompile()
    return module


def forced_onnx(model: bytes, force: dict[Address, bool]) -> bytes:
    import onnx
    from onnx import TensorProto, helper

    proto = onnx.load_from_string(model)
    ifs = onnx_ifs(proto.graph)
    parents = _parents(proto.graph)
    for address, side in force.items():
        node = ifs[address]
        graph = parents[id(node)]
        name = f"stitch_forced_{'_'.join(str(int(a)) for a in address)}"
        constant = helper.make_node("Constant", [], [name], name=name + "_node",
                                    value=helper.make_tensor(name, TensorProto.BOOL, [], [side]))
        index = list(graph.node).index(node)
        graph.node.insert(index, constant)
        node.input[0] = name
    return proto.SerializeToString()


def _parents(graph, found: dict | None = None) -> dict:
    found = {} if found is None else found
    for node in graph.node:
        found[id(node)] = graph
        for attribute in node.attribute:
            if attribute.g is not None and attribute.g.node:
                _parents(attribute.g, found)
    return found


def _summary(error: BaseException) -> str:
    """The first line and assert_close's greatest differences, when it says them."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    keep = lines[:1] + [ln for ln in lines if tm.matches(tm.ASSERT_CLOSE_DETAIL, ln)]
    return "; ".join(keep)[:500]


def check_every_side(program, onnx_graph, examples, run_reference,
                     onnx_runner) -> list[SideCheck]:
    """Force each side of each cond in both graphs and compare on every example.

    ``run_reference(module, example)`` returns outputs (or raises); ``onnx_runner(model)``
    returns a function of an example. WrongSide on a mismatch; OnnxRefused when a side
    cannot be checked."""
    import onnx

    reference = program.exported_program.module()
    conds = fx_conds(reference)
    ifs = onnx_ifs(onnx.load_from_string(onnx_graph.model).graph)
    if fx_loops_with_conds(reference):
        raise OnnxRefused("a cond sits inside a while_loop body; forcing its sides in the ONNX "
                          "Loop is not implemented, so they would go unchecked")
    if set(conds) != set(ifs):
        raise OnnxRefused(f"the ONNX graph's If nodes ({sorted(ifs)}) do not line up with the "
                          f"graph's conds ({sorted(conds)}); the sides the examples miss "
                          "cannot be checked")
    checks = []
    for address in sorted(conds):
        for side in (True, False):
            force = _forcing(address, side)
            module = forced_graph_module(reference, force)
            run_onnx = onnx_runner(forced_onnx(onnx_graph.model, force))
            ran, worst = 0, 0.0
            exact = Float64Reference(lambda module=module: module, list(examples))
            for j, ex in enumerate(examples):
                try:
                    want = run_reference(module, ex)
                except Exception:  # noqa: BLE001 - this input cannot take that side
                    continue
                check = SideCheck(address, side, ran, worst)
                try:
                    got = run_onnx(ex)
                    worst = max(worst, max_error(want, got, exact.at(j)))
                except Exception as e:  # noqa: BLE001 - a mismatch or an ORT failure
                    raise WrongSide(f"ONNX Runtime differs from the stitched graph with "
                                    f"{check.name} forced: {type(e).__name__}: "
                                    f"{_summary(e)}") from None
                ran += 1
            if not ran:
                raise OnnxRefused(f"{SideCheck(address, side, 0, 0.0).name}: no example runs "
                                  "the stitched graph with that side forced, so the ONNX "
                                  "graph's side cannot be checked")
            checks.append(SideCheck(address, side, ran, worst))
    return checks
