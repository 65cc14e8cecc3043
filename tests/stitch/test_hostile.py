"""Hostile and careless models: a clear, specific error (or the model's own exception), and in
every case, success or not, the model, its classes, module globals and Dynamo's global state
are exactly as before."""

from __future__ import annotations

import copy
import re

import hostile_models as hm
import pytest
import torch

import stitch
from capture import InputError
from stitch.errors import (
    GuardsRefusedError,
    SpecializationError,
    UnfixableBreaksError,
    UnsupportedSideEffectError,
)

GUARDS = stitch.Settings(allow_guards=True)  # specialised programs, asked for

X = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))


def _line(marker_text: str) -> str:
    """file:line of the line in hostile_models.py holding ``marker_text`` and ``# MUTATES``."""
    with open(hm.__file__) as f:
        for i, line in enumerate(f, 1):
            if marker_text in line and "# MUTATES" in line:
                return f"{hm.__file__}:{i}"
    raise AssertionError(marker_text)


def _examples(model):
    """Inputs taking both sides of ``h.sum() > 0`` (h = lin(x)) whatever the bias."""
    with torch.no_grad():
        d = (X @ model.lin.weight.T).sum()
        k = 4 * (model.lin.bias.sum().abs() + 1) / d.abs()
        pos = X * k * torch.sign(d)
        assert model.lin(pos).sum() > 0 > model.lin(-pos).sum()
    return [((pos,), {}), ((-pos,), {})]


def _world(model):
    """Everything stitch must leave as it was."""
    python_attrs = {k: copy.deepcopy(v) for k, v in vars(model).items()
                    if not k.startswith("_") and not isinstance(v, torch.Tensor)}
    return {
        "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "attrs": python_attrs,
        "forward": type(model).__dict__.get("forward"),
        "instance_forward": "forward" in vars(model),
        "globals": (copy.deepcopy(hm.COUNTER), list(hm.HISTORY), hm.SCALE),
        "dynamo_config": torch._dynamo.config.get_config_copy(),
        "eval_frame": torch._C._dynamo.eval_frame.get_eval_frame_callback(),
        "grad": torch.is_grad_enabled(),
    }


def _assert_same_world(before, model):
    after = _world(model)
    assert before["state"].keys() == after["state"].keys()
    assert all(torch.equal(before["state"][k], after["state"][k]) for k in before["state"])
    assert repr(before["attrs"]) == repr(after["attrs"])
    assert after["forward"] is before["forward"]
    assert after["instance_forward"] is before["instance_forward"]
    assert after["globals"] == before["globals"]
    assert after["dynamo_config"] == before["dynamo_config"]
    assert after["eval_frame"] is before["eval_frame"]
    assert after["grad"] == before["grad"] and not torch.compiler.is_compiling()


MUTATING = [
    (hm.GlobalCounter, r"module global .*hostile_models\.COUNTER", 'COUNTER["calls"]'),
    (hm.GlobalRebind, r"module global .*hostile_models\.SCALE", "SCALE = 3.0"),
    (hm.AttributeCounter, r"attribute 'calls' of module <root>", "self.calls += 1"),
]


@pytest.mark.parametrize("cls, what, line_text", MUTATING,
                         ids=[c[0].__name__ for c in MUTATING])
def test_python_state_mutations_are_refused_where_they_are(cls, what, line_text):
    torch.manual_seed(0)
    model = cls()
    before = _world(model)
    with pytest.raises(UnsupportedSideEffectError) as info:
        stitch.export(model, (X,), examples=_examples(model))
    message = str(info.value)
    assert re.search(what, message), message
    assert f"{_line(line_text)}: forward mutates" in message
    assert "register_buffer" in message  # what the user can do
    _assert_same_world(before, model)


def test_lazy_attribute_initialisation_is_not_a_side_effect():
    torch.manual_seed(0)
    model = hm.LazyAttribute()
    before = _world(model)
    program = stitch.export(model, (X,), examples=_examples(model))
    _assert_same_world(before, model)
    for (x,), _ in _examples(model):
        assert torch.allclose(program(x), copy.deepcopy(model)(x))


def test_file_write_is_refused_or_guarded_never_dropped(tmp_path):
    """Example 0 writes: refused with the write's location. Example 0 does not write: the
    branch is specialised away and an input that would write is refused at run time."""
    torch.manual_seed(0)
    model = hm.WritesFile(str(tmp_path / "written.txt"))
    before = _world(model)
    writes, skips = _examples(model)
    with pytest.raises(UnfixableBreaksError) as info:
        stitch.export(model, writes[0], examples=[skips])
    sites = info.value.sites
    assert [s.kind.value for s in sites] == ["unsupported_call"]
    assert sites[0].location.endswith(f"hostile_models.py:{_marked_break_line()}")
    _assert_same_world(before, model)
    with pytest.raises(GuardsRefusedError, match=r"(?s)hostile_models.py:\d+.*allow_guards=True"):
        stitch.export(model, skips[0], examples=[writes])  # guards only on request
    _assert_same_world(before, model)
    program = stitch.export(model, skips[0], examples=[writes], settings=GUARDS)
    _assert_same_world(before, model)
    assert [d.action.value for d in program.report.decisions] == ["guarded"]
    assert "torch.cond not possible" in program.report.decisions[0].reason
    with pytest.raises(SpecializationError, match="this input takes the other branch"):
        program(*writes[0])


def _marked_break_line() -> int:
    with open(hm.__file__) as f:
        return next(i for i, line in enumerate(f, 1) if "# BREAK: unsupported_call" in line)


def test_a_tensor_on_one_side_and_none_on_the_other_is_one_graph():
    """The rest of the function reads the value in each arm (continuation.py, case 4): no
    guard, exact on the side the one example does not take."""
    torch.manual_seed(0)
    model = hm.TensorOrNone()
    before = _world(model)
    (pos,), _ = _examples(model)[0]
    (neg,), _ = _examples(model)[1]
    program = stitch.export(model, (pos,))  # only the tensor side is seen
    _assert_same_world(before, model)
    assert program.report.graphs_after == 1 and not program.report.guards
    for x in (pos, neg):
        torch.testing.assert_close(program(x), model(x))


def _source_line(text: str, cls) -> int:
    import inspect

    lines, start = inspect.getsourcelines(cls.forward)
    return start + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("make, what", [
    (hm.exec_model, r"<string>:3 \[branch\].*exec/lambda"),
    (hm.lambda_model, r"hostile_models.py:\d+ \[branch\] in <lambda>"),
], ids=["exec", "lambda"])
def test_source_unavailable_is_refused_with_location(make, what):
    torch.manual_seed(0)
    model = make()
    before = _world(model)
    with pytest.raises(UnfixableBreaksError, match=re.compile(what, re.S)):
        stitch.export(model, (X,), examples=_examples(model))
    _assert_same_world(before, model)


def test_async_forward_is_refused():
    model = hm.AsyncForward()
    before = _world(model)
    with pytest.raises(InputError, match="async"):
        stitch.export(model, (X,))
    _assert_same_world(before, model)


def test_the_models_own_exception_comes_back_unchanged():
    model = hm.OwnError()
    before = _world(model)
    with pytest.raises(KeyError, match="the model's own error") as raised:
        stitch.export(model, (X,))
    assert any("raised by the model itself on example 0" in n
               for n in getattr(raised.value, "__notes__", ())), "no note says whose it is"
    _assert_same_world(before, model)


def test_a_refused_example_does_not_desynchronise_verification_of_the_next():
    """Stateful and guarded: example 1 is refused by the guard; the reference model's state
    must be put back, or example 2 would be compared against a state the program never had
    (a false VerificationError)."""
    torch.manual_seed(0)
    model = hm.GuardedCounter()
    before = _world(model)
    writes, skips = _examples(model)
    program = stitch.export(model, skips[0], examples=[writes, skips], settings=GUARDS)
    _assert_same_world(before, model)
    notes = [c.note for c in program.report.checks]
    assert notes[1].startswith("refused by a guard") and notes[2] == ""
    assert program.report.checks[2].outputs == 1
    # deployment checks and times only the examples the guarded program accepts
    compiled = stitch.compile(program, "auto", repeats=3)
    assert compiled.decision.graph in {"eager", "inductor", "aoti"}
    # the fastest may be the model itself (timing decides): the graph refuses the input
    graph = compiled if compiled.decision.chosen != "model" else stitch.compile(program, "eager")
    with pytest.raises(SpecializationError):
        graph(*writes[0])
