"""Python numbers that differ among the examples are run-time inputs of the program
(``stitch/number_inputs.py``): diffusers ControlNet's ``conditioning_scale`` given as 0.5 in
one example and left to its default 1.0 in another is one program, exact on both and on any
other value at call time. A number equal in every example stays a constant; one the traced
code cannot take as an input is refused, naming it, its values and what to change."""

from __future__ import annotations

import pytest
import torch
from torch.export.graph_signature import ConstantArgument, InputKind, TensorArgument

import stitch
from capture.inputs import Example
from stitch.errors import VerificationError
from stitch.number_inputs import NumberInput, differing_numbers, graph_inputs


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, conditioning_scale: float = 1.0):
        return self.lin(x) * conditioning_scale


class Offset(torch.nn.Module):
    """An int stays an int: ``torch.full`` of it is an int64 tensor, ``n // 2`` floors."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, n: int):
        return self.lin(x) + n, torch.full((2,), n // 2)


class Flagged(torch.nn.Module):
    def forward(self, x, double: bool = False):
        if double:  # a Python test on the flag: a cond on the input
            return x * 2
        return x - 1


class Heads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

    def forward(self, x, head: int):
        return self.heads[head](x)  # an index into a Python list: no input can choose it


def _user_inputs(program) -> dict:
    return {s.arg.name: s.arg for s in program.exported_program.graph_signature.input_specs
            if s.kind == InputKind.USER_INPUT}


def _exact(got, want):
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_a_float_keyword_that_differs_is_an_input_exact_on_every_value():
    torch.manual_seed(0)
    model = Scaled().eval()
    x = torch.randn(2, 4)
    program = stitch.export(model, (x,), kwargs={"conditioning_scale": 0.5},
                            examples=[((torch.randn(2, 4),), {})])
    assert isinstance(_user_inputs(program)["conditioning_scale"], TensorArgument)
    for scale in (0.5, 1.0, 0.1, -3.75, 7):  # the examples', others, an int for a float
        _exact(program(x, conditioning_scale=scale), model(x, conditioning_scale=scale))
    _exact(program(x), model(x))  # left out: its default, as for the model
    assert any("conditioning_scale (float" in n for n in program.report.notes)
    assert [c.what for c in program.report.checks][:2] == ["example 0", "example 1"]
    # every backend runs the program's examples: they hold the graph's 0-d tensors
    assert program.examples[0].kwargs["conditioning_scale"].dtype == torch.float64
    compiled = stitch.compile(program, "eager")
    _exact(compiled(x, conditioning_scale=0.3), model(x, conditioning_scale=0.3))


def test_an_int_positional_that_differs_stays_an_int():
    torch.manual_seed(1)
    model = Offset().eval()
    x = torch.randn(2, 4)
    program = stitch.export(model, (x, 3), examples=[((torch.randn(2, 4), 5), {})])
    assert isinstance(_user_inputs(program)["n"], TensorArgument)
    for n in (3, 5, -11, 2 ** 40):
        got, want = program(x, n), model(x, n)
        _exact(got, want)
        assert got[1].dtype == torch.int64
    with pytest.raises(TypeError, match="input 'n': the program takes an int.*float 2.5"):
        program(x, 2.5)


def test_a_number_equal_in_every_example_stays_a_constant():
    model = Scaled().eval()
    x = torch.randn(2, 4)
    program = stitch.export(model, (x,), kwargs={"conditioning_scale": 0.5},
                            examples=[((torch.randn(3, 4),), {"conditioning_scale": 0.5})])
    held = _user_inputs(program)["conditioning_scale"]
    assert isinstance(held, ConstantArgument) and held.value == 0.5
    _exact(program(x, conditioning_scale=0.5), model(x, conditioning_scale=0.5))
    with pytest.raises(TypeError, match="exported with conditioning_scale=0.5.*top-level "
                                        "argument of forward and the examples differ"):
        program(x, conditioning_scale=1.0)
    assert not any("run-time inputs" in n for n in program.report.notes)


def test_a_flag_that_differs_is_an_input_and_its_test_a_cond():
    model = Flagged()
    x = torch.randn(2, 4)
    program = stitch.export(model, (x,), kwargs={"double": True},
                            examples=[((torch.randn(2, 4),), {})])
    assert isinstance(_user_inputs(program)["double"], TensorArgument)
    for double in (True, False):
        _exact(program(x, double=double), model(x, double=double))


def test_a_number_no_input_can_carry_is_refused_naming_it():
    with pytest.raises(VerificationError, match=r"'head' \(int\): 0 in example 0, 2 in example "
                                                r"1\..* refused: .*What you can do") as refused:
        stitch.export(Heads(), (torch.randn(2, 4), 0), examples=[((torch.randn(2, 4), 2), {})])
    assert "an index into a Python container" in str(refused.value)


def test_numbers_that_differ_are_found_by_parameter():
    model = Scaled()
    x = torch.ones(1, 4)
    found = differing_numbers(model, [Example((x,), {"conditioning_scale": 1}),
                                      Example((x,), {"conditioning_scale": 0.5})])
    assert found == (NumberInput("conditioning_scale", 1, "float", (1, 0.5), 1.0, True),)
    same = [Example((x, 2.0), {}), Example((x, 2.0), {})]
    assert differing_numbers(model, same) == ()
    assert differing_numbers(model, [Example((x, True), {}), Example((x, 2), {})]) == ()
    args, kwargs = graph_inputs(found, (x,), {})  # a call leaving it out: the default
    assert kwargs["conditioning_scale"].item() == 1.0


def test_an_onnx_artifact_takes_the_number(tmp_path):
    pytest.importorskip("onnxruntime")
    torch.manual_seed(2)
    model = Scaled().eval()
    x = torch.randn(2, 4)
    program = stitch.export(model, (x,), kwargs={"conditioning_scale": 0.5},
                            examples=[((torch.randn(2, 4),), {})])
    path = str(tmp_path / "scaled.onnx")
    program.save(path)
    loaded = stitch.load(path)
    inputs = {s["name"]: s for s in loaded.manifest["signature"]["inputs"]}
    assert inputs["conditioning_scale"]["number"] == "float"
    for scale in (0.5, 1.0, -2.25):
        torch.testing.assert_close(loaded(x, conditioning_scale=scale),
                                   model(x, conditioning_scale=scale))
    torch.testing.assert_close(loaded(x), model(x))


@pytest.mark.slow
def test_a_pt2_artifact_takes_the_number_exactly(tmp_path):
    torch.manual_seed(3)
    model = Offset().eval()
    x = torch.randn(2, 4)
    program = stitch.export(model, (x, 3), examples=[((torch.randn(2, 4), 5), {})])
    path = str(tmp_path / "offset.pt2")
    program.save(path)
    loaded = stitch.load(path)
    for n in (3, 5, 9):
        _exact(loaded(x, n), model(x, n))
