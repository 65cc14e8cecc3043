"""A program refuses a call that passes a tensor where it was exported with ``None`` (torch
keeps ``None`` as a constant of the graph and would silently ignore the tensor), and fills
in the ``None`` a call leaves out (stitch/call_inputs.py)."""

from __future__ import annotations

import pytest
import torch

import stitch


class OptionalBias(torch.nn.Module):
    def forward(self, x, bias=None):
        if bias is not None:
            x = x + bias
        if x.sum() > 0:
            return x * 2
        return x


@pytest.fixture(scope="module")
def program():
    return stitch.export(OptionalBias(), (torch.ones(3), None),
                         examples=[((-torch.ones(3), None), {})])


def test_a_tensor_where_the_program_holds_none_is_refused_not_ignored(program):
    bias = torch.full((3,), 5.0)
    for call in (lambda: program(torch.ones(3), bias),
                 lambda: program(torch.ones(3), bias=bias)):
        with pytest.raises(TypeError, match="exported with bias=None"):
            call()  # it returned 2s, the model gives 12s


def test_the_none_a_call_leaves_out_is_filled_in(program):
    model = OptionalBias()
    for x in (torch.ones(3), -torch.ones(3)):
        torch.testing.assert_close(program(x), model(x))
        torch.testing.assert_close(program(x, None), model(x, None))


def test_the_compiled_program_refuses_it_too(program):
    compiled = stitch.compile(program, "eager")
    with pytest.raises(TypeError, match="exported with bias=None"):
        compiled(torch.ones(3), torch.full((3,), 5.0))
    torch.testing.assert_close(compiled(torch.ones(3)), OptionalBias()(torch.ones(3)))


class ScaledByFirst(torch.nn.Module):
    def forward(self, x, ks: list):
        if x.sum() > 0:
            return x * ks[0]
        return x


def test_an_example_failing_the_programs_own_guard_is_explained():
    """torch.export specialises a non-tensor input to the traced value, and a number inside
    a list stays such a constant (a top-level one is an input: test_number_inputs.py): the
    example with another is refused naming the input, the value the graph holds and what
    to change."""
    with pytest.raises(stitch.errors.VerificationError,
                       match=r"(?s)input 'ks_0'.*exported with ks_0=3, a constant of its "
                             r"graph.*top-level argument of forward.*one program per value"):
        stitch.export(ScaledByFirst(), (torch.ones(3), [3]),
                      examples=[((-torch.ones(3), [4]), {})])


class Flagged(torch.nn.Module):
    def forward(self, x, bias=None, scale: int = 2):
        if bias is not None:
            x = x + bias
        if x.sum() > 0:
            return x * scale
        return x


def test_a_loaded_artifact_refuses_a_value_its_graph_holds_as_a_constant(tmp_path):
    """AOTInductor's runner keeps only a call's tensors and the ONNX graph has no input for a
    constant: the loaded artifact checks the constants its manifest records (ONNX Runtime
    returned 2s for ``bias=5s``, the model gives 12s)."""
    program = stitch.export(Flagged(), (torch.ones(3), None, 2),
                            examples=[((-torch.ones(3), None, 2), {})])
    loaded = stitch.load(program.save(str(tmp_path / "flagged.onnx")))
    x = torch.ones(3)
    torch.testing.assert_close(loaded(x, None, 2), Flagged()(x, None, 2))
    with pytest.raises(TypeError, match=r"bias=None.*called with a Tensor of shape \(3,\)"):
        loaded(x, torch.full((3,), 5.0), 2)
    with pytest.raises(TypeError, match="scale=2.*called with int 3"):
        loaded.call((x, None, 3))


class Difference(torch.nn.Module):
    def forward(self, q, k):
        if q.sum() > 0:
            q = q * 1.0
        return q - k


class FirstTimesTen(torch.nn.Module):
    def forward(self, xs):
        return xs[0] * 10 + xs[1]


def test_a_tensor_the_example_passes_twice_is_two_inputs_of_the_program():
    """torch.export lifts one input for a tensor passed in two places, and its program
    reads the first for both on every later call (``q - k`` gave 0 for (5, 2); plain
    torch.export does the same): stitch exports such an example as two tensors."""
    x = torch.ones(2)
    a, b = torch.full((2,), 5.0), torch.full((2,), 2.0)
    program = stitch.export(Difference(), (x, x))
    torch.testing.assert_close(program(a, b), a - b)
    listed = stitch.export(FirstTimesTen(), ([x, x],))
    torch.testing.assert_close(listed([a, b]), a * 10 + b)


class Masked(torch.nn.Module):
    def forward(self, x, mask):
        h = x * mask
        if h.sum() > 0:
            h = h * 2
        return h


@pytest.mark.slow
def test_a_compiled_program_says_what_is_wrong_with_a_malformed_call():
    """Inductor's build answered a missing input with Dynamo's "Attempt to trace generator"
    and None for a tensor with "Observed exception"."""
    program = stitch.export(Masked(), (torch.ones(2), torch.ones(2)),
                            examples=[((-torch.ones(2), torch.ones(2)), {})])
    compiled = stitch.compile(program, "inductor")
    with pytest.raises(TypeError, match=r"takes \(x, mask\); the call passed 1 positional"):
        compiled(torch.ones(2))
    with pytest.raises(TypeError, match="input 'mask' was exported as a tensor and the call "
                                        "passed NoneType None"):
        compiled(torch.ones(2), None)
    torch.testing.assert_close(compiled(torch.ones(2), torch.ones(2)), torch.full((2,), 2.0))


def test_a_tensor_passed_as_a_positional_and_a_keyword_is_two_inputs_too():
    x = torch.ones(2)
    a, b = torch.full((2,), 5.0), torch.full((2,), 2.0)
    program = stitch.export(Difference(), (x,), {"k": x})
    torch.testing.assert_close(program(a, k=b), a - b)


class BumpsItsInput(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            y = x * 2
        else:
            y = x - 1
        x.add_(1)  # the forward writes its input in place
        return y


def test_every_run_starts_from_the_examples_values_as_given():
    """The analysis ran the forward many times on one copy of each example, so ``x.add_(1)``
    drifted it: the example given for the false side (-3s) reached verification positive,
    took the true side, and the false side was only forced. Each run now starts from the
    values given (``isolation.examples_kept``)."""
    program = stitch.export(BumpsItsInput(), (torch.ones(3),),
                            examples=[((torch.full((3,), -3.0),), {})])
    forced = [c.what for c in program.report.checks if "forced" in c.what]
    assert not any("false" in w for w in forced), [c.what for c in program.report.checks]
    for v in (1.0, -3.0):
        x = torch.full((3,), v)
        torch.testing.assert_close(program(x.clone()), BumpsItsInput()(x.clone()))
