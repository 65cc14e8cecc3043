"""A cond whose operand became a number during the trace (a lifted size later
specialised): torch.export's placeholder naming read ``.name`` of it and failed
(``AttributeError: 'int' object has no attribute 'name'``). While stitch traces, the arm's
placeholder keeps its own name (capture/cond_number_operands.py)."""

from __future__ import annotations

import pytest
import torch
from torch._export import utils as export_utils

from capture.cond_number_operands import cond_number_operands_named
from capture.tracing_fixes import tracing_fixes


def _arm(op) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    x, n = graph.placeholder("x"), graph.placeholder("n")
    graph.output((graph.call_function(op, (x, n)),))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _program(second=None) -> torch.fx.GraphModule:
    """What torch.export holds before naming: ``cond(pred, arm, arm, (x, second))``, the
    second operand ``x`` itself where ``second`` is None."""
    root = torch.nn.Module()
    root.true_graph_0, root.false_graph_0 = _arm(torch.mul), _arm(torch.sub)
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    pred = graph.call_function(torch.ops.aten.gt.Scalar, (x, 0))
    node = graph.call_function(torch.ops.higher_order.cond, (
        pred, graph.get_attr("true_graph_0"), graph.get_attr("false_graph_0"),
        (x, x if second is None else second)))
    graph.output((graph.call_function(lambda t: t[0], (node,)),))
    return torch.fx.GraphModule(root, graph)


def _program_with_a_number_operand() -> torch.fx.GraphModule:
    return _program(16)


def test_torch_alone_fails_on_the_number():
    """The torch bug the fix is for; if this fails, torch fixed it and the fix can go."""
    with pytest.raises(AttributeError, match="'int' object has no attribute 'name'"):
        export_utils._name_hoo_subgraph_placeholders(_program_with_a_number_operand())


def test_the_arm_keeps_its_placeholder_and_the_operands_are_put_back():
    original = export_utils._name_hoo_subgraph_placeholders
    gm = _program_with_a_number_operand()
    with tracing_fixes(), cond_number_operands_named():  # re-entrant
        export_utils._name_hoo_subgraph_placeholders(gm)
    assert export_utils._name_hoo_subgraph_placeholders is original
    cond = next(n for n in gm.graph.nodes if n.target is torch.ops.higher_order.cond)
    assert cond.args[3][1] == 16  # the operand is the number again
    for arm in (gm.true_graph_0, gm.false_graph_0):
        # the tensor placeholder takes the operand's name, the number's keeps the arm's own
        assert [p.name for p in arm.graph.find_nodes(op="placeholder")] == ["x", "n"]


def _program_with_a_repeated_operand() -> torch.fx.GraphModule:
    """One node twice among the operands (a size each arm lifted on its own)."""
    return _program()


def test_torch_alone_names_two_placeholders_alike():
    """The torch bug: both placeholders named ``x``, the arm no longer compiles."""
    with pytest.raises(SyntaxError, match="duplicate argument"):
        export_utils._name_hoo_subgraph_placeholders(_program_with_a_repeated_operand())


def test_a_repeated_operand_keeps_the_arm_placeholder_its_own_name():
    gm = _program_with_a_repeated_operand()
    with cond_number_operands_named():
        export_utils._name_hoo_subgraph_placeholders(gm)
    cond = next(n for n in gm.graph.nodes if n.target is torch.ops.higher_order.cond)
    assert cond.args[3][0] is cond.args[3][1]  # the operands as they were
    for arm in (gm.true_graph_0, gm.false_graph_0):
        assert [p.name for p in arm.graph.find_nodes(op="placeholder")] == ["x", "n"]
