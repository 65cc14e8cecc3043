"""What tracing a cond's arms with Dynamo costs in torch.export (non-strict), against the
cond operator traced by make_fx, and why stitch cannot simply take the cheaper one.

``torch.cond`` compiles each call's arms with Dynamo (``_hop_compile_and_call``), which lifts
the tensors the arms read from their closure into operands. Calling the operator itself
(``torch.ops.higher_order.cond``) traces the arms with make_fx instead: far cheaper, but a
tensor the arms close over is baked into the graph as a constant (a parameter, or an
intermediate of this very call: the trace's fake tensor, so running the program fails). An arm traced so
must take every tensor it reads as an operand.

    python experiments/cond_trace_cost.py
"""

from __future__ import annotations

import time

import torch
from torch.export import Dim

N = 24  # conds in a row, as in a 12-layer model with two per layer


class Chain(torch.nn.Module):
    def __init__(self, direct: bool) -> None:
        super().__init__()
        self.lins = torch.nn.ModuleList([torch.nn.Linear(64, 64) for _ in range(N)])
        self.direct = direct

    def forward(self, x):
        cond = torch.ops.higher_order.cond if self.direct else torch.cond
        for lin in self.lins:
            def t(h, w, b):
                return (torch.nn.functional.linear(h, w, b).relu(),)

            def f(h, w, b):
                return (h * 0.5,)
            x = cond(x.sum() > 0, t, f, (x, lin.weight, lin.bias))[0]
        return x


class Closure(torch.nn.Module):
    """An arm that reads an intermediate of the call from its closure."""

    def forward(self, x):
        y = x * 2
        return torch.ops.higher_order.cond(x.sum() > 0, lambda h: (h + y,), lambda h: (h - y,),
                                           (x,))[0]


def main() -> None:
    x = torch.randn(8, 64)
    for direct in (False, True):
        model = Chain(direct)
        start = time.perf_counter()
        ep = torch.export.export(model, (x,), dynamic_shapes={"x": {0: Dim.AUTO}})
        seconds = time.perf_counter() - start
        same = all(torch.allclose(ep.module()(v), model(v)) for v in (x, -x))
        name = "torch.ops.higher_order.cond (make_fx)" if direct else "torch.cond (Dynamo)"
        print(f"{name}: {N} conds exported in {seconds:.2f} s; equal to eager: {same}")
    ep = torch.export.export(Closure(), (x,))
    constants = [n for n in ep.graph_module.true_graph_0.graph.nodes if n.op == "get_attr"]
    try:
        same = torch.allclose(ep.module()(x), Closure()(x))
        outcome = f"equal to eager: {same}"
    except Exception as e:  # noqa: BLE001 - what running the program does is the finding
        outcome = f"running it raises {type(e).__name__}"
    print(f"an arm closing over an intermediate, traced by make_fx: the arm holds "
          f"{len(constants)} constant(s) in its place; {outcome}")


if __name__ == "__main__":
    main()
