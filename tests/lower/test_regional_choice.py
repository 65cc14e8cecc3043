"""Each piece of a regionally lowered graph runs compiled only where, on the inputs the
examples gave it, it matches itself run eagerly and is faster; otherwise it runs as
exported, with the reason recorded (no Inductor here: the compilers are stand-ins)."""

from __future__ import annotations

import time

import torch

from stitch.lower.regional_choice import PieceReason, decide, record


def _piece() -> torch.fx.GraphModule:
    return torch.fx.symbolic_trace(lambda x: (x * 2 + 1,))


def _slowed(piece, seconds):
    def run(*args):
        time.sleep(seconds)
        return piece(*args)
    return run


def test_a_piece_no_example_reaches_runs_as_exported():
    piece = _piece()
    decision, runs = decide("submod_1.false_graph_0", "cond arm", piece, [],
                            compiler=lambda m: 1 / 0)
    assert decision.reason is PieceReason.NOT_REACHED and runs is piece


def test_a_piece_that_fails_to_compile_or_differs_runs_as_exported():
    piece, calls = _piece(), [(torch.ones(3),)]

    def fails(module):
        raise RuntimeError("LoweringException: KeyError: 'unbacked_bindings'\nmore")
    decision, runs = decide("submod_0", "region", piece, calls, compiler=lambda m: fails)
    assert decision.reason is PieceReason.FAILED and runs is piece
    assert decision.detail == "RuntimeError: LoweringException: KeyError: 'unbacked_bindings'"

    decision, runs = decide("submod_0", "region", piece, calls,
                            compiler=lambda m: lambda x: (x * 2,))
    assert decision.reason is PieceReason.DIFFERS and runs is piece


def test_a_number_a_piece_returns_is_compared_exactly():
    piece = torch.fx.symbolic_trace(lambda x, n: (x + 1, n + 1))
    decision, _ = decide("submod_0", "region", piece, [(torch.ones(2), 3)],
                         compiler=lambda m: lambda x, n: (x + 1, n + 2))
    assert decision.reason is PieceReason.DIFFERS and "5" in decision.detail


def test_the_compiled_form_is_kept_only_where_it_is_faster():
    piece, calls = _piece(), [(torch.ones(3),), (torch.ones(5),)]
    decision, runs = decide("submod_0", "region", piece, calls,
                            compiler=lambda m: _slowed(m, 0.002))
    assert decision.reason is PieceReason.NOT_FASTER and runs is piece
    assert decision.compiled_ms > decision.eager_ms

    slow = _slowed(piece, 0.002)
    decision, runs = decide("submod_0", "region", slow, calls, compiler=lambda m: piece)
    assert decision.reason is PieceReason.FASTER and runs is piece and decision.compiled


def test_recording_keeps_each_pieces_inputs_and_puts_the_pieces_back():
    class Owner(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.arm = _piece()

        def forward(self, x):
            out = self.arm(x)
            x.add_(1)  # a later write to an input does not change what was recorded
            return out

    owner = Owner()
    arm = owner.arm
    calls = record(lambda: owner(torch.zeros(2)), {"arm": (owner, "arm")})
    assert owner.arm is arm
    assert torch.equal(calls["arm"][0][0], torch.zeros(2))
