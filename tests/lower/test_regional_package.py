"""The glue of a regional artifact is rebuilt from its program: the same pieces, by name and
code, as the program saved and loaded again gives; a piece that does not fit is refused
before anything runs; and a compiled piece runs only on calls it was compiled for."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import torch

from stitch.lower.regional_aoti import AotiPiece, PieceSignature
from stitch.lower.regional_package import PieceMismatch, code_sha256, rebuild, split_program

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
from repro_aoti_cond_item import FramesOffset  # noqa: E402


@pytest.fixture(scope="module")
def program():
    return torch.export.export(FramesOffset(), (torch.tensor([[2, 3], [1, 4]]),), strict=False)


def _reloaded(ep):
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    return torch.export.load(buffer)


def test_a_saved_and_loaded_program_is_cut_into_the_same_pieces(program):
    _, before = split_program(program)
    _, after = split_program(_reloaded(program))
    assert list(before) == list(after)
    for name, (owner, attr, _) in before.items():
        again = after[name]
        assert code_sha256(getattr(owner, attr)) == code_sha256(getattr(*again[:2]))


def _entry(program, name="submod_4", **changed):
    _, found = split_program(program)
    owner, attr, kind = found[name]
    sig = PieceSignature(({"dtype": "torch.int64", "device": "cpu", "shape": ["s0"]},
                          {"dtype": "torch.int64", "device": "cpu", "shape": ["s1"]}),
                         {"s0": [2, None], "s1": [2, None]}, ("tensor",))
    return {"name": name, "kind": kind, "model": "piece_0",
            "code_sha256": code_sha256(getattr(owner, attr)), "signature": sig.to_json(),
            **changed}


def test_rebuilding_refuses_a_piece_that_does_not_fit(program):
    with pytest.raises(PieceMismatch, match="submod_9 is not in the graph"):
        rebuild(program, {"piece_0": None}, [{**_entry(program), "name": "submod_9"}])
    with pytest.raises(PieceMismatch, match="other code"):
        rebuild(program, {"piece_0": None}, [_entry(program, code_sha256="0" * 64)])
    with pytest.raises(PieceMismatch, match="piece_0 is missing"):
        rebuild(program, {}, [_entry(program)])


def test_a_rebuilt_graph_runs_its_piece_only_where_a_call_fits(program):
    calls, eager = [], {}

    def runner(*args):  # stands for the AOTInductor model: the piece, each call counted
        calls.append(args)
        return eager["piece"](*args)

    module = rebuild(program, {"piece_0": runner}, [_entry(program)])
    piece = module.submod_4
    eager["piece"] = piece.piece
    assert isinstance(piece, AotiPiece)
    model = FramesOffset()
    for grid in ([[2, 3], [1, 4]], [[1, 5], [3, 2]], [[1, 1], [2, 2]]):
        grid = torch.tensor(grid)
        assert torch.equal(module(grid), model(grid))
    # the last grid's first row gives 1 element, under s0's range: that call runs eagerly
    assert piece.misses == 1 and len(calls) == 2


def test_a_signature_checks_dtype_size_range_and_one_size_per_symbol():
    sig = PieceSignature(({"dtype": "torch.float32", "device": "cpu", "shape": [2, "s0"]},
                          {"dtype": "torch.float32", "device": "cpu", "shape": ["s0"]}),
                         {"s0": [2, 8]}, ("tensor",))
    assert sig.fits([torch.zeros(2, 3), torch.zeros(3)])
    assert not sig.fits([torch.zeros(2, 3), torch.zeros(4)])  # s0 is 3 and 4
    assert not sig.fits([torch.zeros(3, 3), torch.zeros(3)])  # a fixed size differs
    assert not sig.fits([torch.zeros(2, 9), torch.zeros(9)])  # out of s0's range
    assert not sig.fits([torch.zeros(2, 3, dtype=torch.int64), torch.zeros(3)])
    assert not sig.fits([torch.zeros(3, 2).t(), torch.zeros(3)])  # not contiguous
    assert not sig.fits([torch.zeros(2, 3)])
    assert PieceSignature.from_json(sig.to_json()) == sig
