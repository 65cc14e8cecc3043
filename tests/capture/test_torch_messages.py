"""Each text stitch reads in torch's messages (capture/torch_messages.py), made by the pinned
torch and matched by its pattern: a torch release that rewords one fails here.

Each test runs a tiny program that makes torch emit the message (a data-dependent `if`
under torch.compile or torch.export, `.item()` with scalar capture off, a failed input
guard, a torch.cond given an operand that is no tensor ...) and asserts the pattern finds
it, with the groups the callers read.

Messages no tiny program emits cheaply are tested on a copy written from torch 2.14.1, and
on torch's source where it holds the words (so a rewording there still fails here):

- GUARD_FAILED_SAME_FRAME: Dynamo raises it only when a guard it just built fails on the
  frame it was built from (torch calls that a bug); stitch meets it where a cond arm
  constrains a size lifted from data. The copy is torch/_dynamo/guards.py's format with a
  data-dependent reason, not a captured run.
- HOP_CALL_FAILED: a torch.cond/while_loop whose fake-tensor run raises, seen as an
  "Observed exception" break in a frame Dynamo goes on tracing. The small programs tried
  (arms of different ranks, an arm that raises, inlined or under try) raise
  TorchRuntimeError or UncapturedHigherOrderOpError instead. The copy's inner text is
  what torch 2.14.1 emits (test_fake_tensor_call_text); its wrapping (Dynamo's
  ``raised exception X('...')`` context) is not captured, so whether the pattern still
  matches a real break on 2.14.1 is unconfirmed.
- ONNX_TRANSLATING: the ONNX exporter failing on one node (needs onnxscript and an op it
  cannot translate); the copy follows torch/onnx/_internal/exporter/_core.py's text.
"""

from __future__ import annotations

import inspect
import logging
import re
import warnings

import pytest
import torch
import torch._dynamo
from torch._dynamo.symbolic_convert import InstructionTranslatorBase

from capture import torch_messages as tm

LIVE: set[str] = set()  # messages a test below makes torch emit (``emits``)
# messages tested on a copy (torch 2.14.1) and torch's source: see the docstring
RECORDED = {"GUARD_FAILED_SAME_FRAME", "HOP_CALL_FAILED", "ONNX_TRANSLATING"}


def emits(*names: str):
    """Mark a test as making torch emit ``names`` (checked by test_every_message_is_tested,
    whichever tests a run selects)."""
    LIVE.update(names)
    return lambda test: test


class _Wrap(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def compile_error(fn, *args, fullgraph: bool = True) -> BaseException:
    torch._dynamo.reset()
    with pytest.raises(Exception) as info:
        torch.compile(fn, backend="eager", fullgraph=fullgraph)(*args)
    return info.value


def export_error(fn, x) -> BaseException:
    torch._dynamo.reset()
    with pytest.raises(Exception) as info:
        torch.export.export(_Wrap(fn), (x,), strict=False)
    return info.value


def logged_breaks(fn, *args, monkeypatch) -> list[tuple[str, str]]:
    """(gb_type, reason as Dynamo wrote it) of each break Dynamo logs running ``fn``."""
    seen: list[tuple[str, str]] = []
    original = InstructionTranslatorBase.log_graph_break

    def log(self, code_options, reason, exc):
        seen.append((str(getattr(exc, "gb_type", "") or type(exc).__name__), reason))
        return original(self, code_options, reason, exc)

    monkeypatch.setattr(InstructionTranslatorBase, "log_graph_break", log)
    torch._dynamo.reset()
    torch.compile(fn, backend="eager")(*args)
    return seen


X = torch.randn(4)


def _branch(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


# --- Dynamo graph breaks ---------------------------------------------------------------

@emits("DATA_DEPENDENT_BRANCHING", "BRANCHING_WORDS", "DATA_DEPENDENT_BREAK", "EXPLANATION",
       "USER_CODE_SECTION", "TRACEBACK_FRAME")
def test_data_dependent_branching():
    text = str(compile_error(_branch, X))
    gb_type = text.splitlines()[0]
    assert tm.matches(tm.DATA_DEPENDENT_BRANCHING, gb_type)
    assert tm.matches(tm.BRANCHING_WORDS, text) and tm.matches(tm.DATA_DEPENDENT_BREAK, gb_type)
    assert tm.matches(tm.EXPLANATION, text)
    user = tm.split_at(tm.USER_CODE_SECTION, text)
    assert user is not None and not tm.before(tm.USER_CODE_SECTION, text).endswith("\n")
    assert (__file__, _branch.__code__.co_firstlineno + 1, "_branch") in tm.frames(user[1])


@emits("TENSOR_ITEM", "SCALAR_READ_NOT_CAPTURED", "BREAK_PREAMBLE")
def test_item_without_scalar_capture(monkeypatch):
    breaks = logged_breaks(lambda x: x * x.sum().item(), X, monkeypatch=monkeypatch)
    gb_type, reason = breaks[0]
    assert tm.matches(tm.TENSOR_ITEM, gb_type)
    assert tm.matches(tm.SCALAR_READ_NOT_CAPTURED, gb_type)
    assert tm.matches(tm.DATA_DEPENDENT_BREAK, gb_type)
    assert tm.matches(tm.BREAK_PREAMBLE, reason)


@emits("GRAPH_BREAK_IN_LOOP", "LOOP_BREAK_INNER", "UNTRACEABLE_CALL")
def test_break_inside_a_loop(monkeypatch, capsys):
    from capture.dynamo_breaks import recording_breaks

    def loop_print(x):
        for _ in range(2):
            print("step")
            x = x + 1
        return x

    torch._dynamo.reset()
    with recording_breaks() as breaks:
        torch.compile(loop_print, backend="eager")(X)
    in_loop = [b for b in breaks if tm.matches(tm.GRAPH_BREAK_IN_LOOP, b.gb_type)]
    assert in_loop, [b.gb_type for b in breaks]
    inner = tm.search(tm.LOOP_BREAK_INNER, in_loop[0].reason)
    assert inner is not None and inner.group(1).strip() == "Failed to trace builtin operator"
    assert tm.matches(tm.UNTRACEABLE_CALL, inner.group(1))
    assert not tm.matches(tm.DATA_DEPENDENT_BREAK, inner.group(1))


@emits("DYNAMIC_SHAPE_OPERATOR")
def test_dynamic_shape_operator(monkeypatch):
    breaks = logged_breaks(lambda x: x.nonzero() + 1, X, monkeypatch=monkeypatch)
    assert tm.matches(tm.DYNAMIC_SHAPE_OPERATOR, breaks[0][0])


@emits("DATA_DEPENDENT_OPERATOR", "DATA_DEPENDENT_PYTHON_VALUE")
def test_data_dependent_operator(monkeypatch):
    breaks = logged_breaks(lambda x: x + 1 if torch.equal(x, x) else x, X,
                           monkeypatch=monkeypatch)
    gb_type, reason = breaks[0]
    assert tm.matches(tm.DATA_DEPENDENT_OPERATOR, gb_type)
    assert tm.matches(tm.DATA_DEPENDENT_PYTHON_VALUE, reason)


@emits("LOGGER_CALL")
def test_logger_call(monkeypatch):
    logger = logging.getLogger("tests.torch_messages")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False

    def logs(x):
        logger.warning("seen")
        return x + 1

    breaks = logged_breaks(logs, X, monkeypatch=monkeypatch)
    assert tm.matches(tm.LOGGER_CALL, breaks[0][0])


@torch.compiler.disable
def _disabled(x):
    return x + 1


@emits("COMPILER_DISABLE")
def test_disabled_call(monkeypatch):
    breaks = logged_breaks(lambda x: _disabled(x) * 2, X, monkeypatch=monkeypatch)
    gb_type, reason = breaks[0]
    assert tm.matches(tm.COMPILER_DISABLE, reason)
    assert tm.matches(tm.UNTRACEABLE_CALL, gb_type)


@emits("RNN_WRAP")
def test_rnn(monkeypatch):
    lstm = torch.nn.LSTM(4, 4)
    breaks = logged_breaks(lambda x: lstm(x)[0], torch.randn(2, 1, 4), monkeypatch=monkeypatch)
    assert tm.matches(tm.RNN_WRAP, breaks[0][0])


@emits("GENERIC_CONTEXT_BREAK")
def test_break_under_a_context_manager(capsys):
    from capture.dynamo_breaks import recording_breaks

    class Scope:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def in_scope(x):
        with Scope():
            print("inside")
            y = x + 1
        return y

    torch._dynamo.reset()
    with recording_breaks() as breaks:
        torch.compile(in_scope, backend="eager")(X)
    assert any(tm.matches(tm.GENERIC_CONTEXT_BREAK, b.gb_type) for b in breaks)


@emits("SCALAR_IN_OP")
def test_scalar_in_op():
    # the op Dynamo names where an op reads a tensor as a number
    assert tm.matches(tm.SCALAR_IN_OP, str(torch.ops.aten._local_scalar_dense.default))


@emits("EXPECTED_BOOL_FAKE")
def test_expected_bool_from_a_fake_tensor():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import guard_bool

    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.tensor(True))
        with pytest.raises(AssertionError) as info:
            guard_bool(fake)
    assert tm.matches(tm.EXPECTED_BOOL_FAKE, str(info.value))


# --- torch.cond / while_loop -----------------------------------------------------------

@emits("HIGHER_ORDER_OP_ERROR", "HIGHER_ORDER_OP_LINE", "CAPTURE_CONFIG_HINT")
def test_scalar_read_in_a_cond_arm():

    def reads(x):
        return torch.cond(x.sum() > 0, lambda x: x * int(x.sum().item()), lambda x: x - 1,
                          (x,))

    # (with fullgraph=True torch 2.14.1 captures this read)
    text = str(compile_error(reads, X, fullgraph=False))
    assert tm.matches(tm.HIGHER_ORDER_OP_ERROR, text)
    assert tm.matches(tm.CAPTURE_CONFIG_HINT, text)
    assert any(tm.matches(tm.HIGHER_ORDER_OP_LINE, line.strip()) for line in text.splitlines())


class _NotATensor:
    pass


@emits("COND_REFUSED")
def test_cond_refuses_an_operand():
    other = _NotATensor()

    def nested(x):
        def arm(x):
            return torch.cond(x.sum() > 0, lambda x, o: x + 1, lambda x, o: x - 1, (x, other))
        return torch.cond(x.sum() > 0, arm, lambda x: x - 1, (x,))

    found = tm.search(tm.COND_REFUSED, str(compile_error(nested, X)))
    assert found is not None and found.group(1).startswith("torch.cond: improper operands")


@emits("COND_INPUT_ALIASING", "HOP_ALIASING")
def test_cond_input_aliasing():

    def views(x):
        a, b = x.chunk(2)
        return torch.cond(x.sum() > 0, lambda a, b: a + b, lambda a, b: a - b, (a, b))

    text = str(export_error(views, X))
    assert tm.matches(tm.COND_INPUT_ALIASING, text) and tm.matches(tm.HOP_ALIASING, text)


def test_cond_output_aliasing():
    text = str(export_error(
        lambda x: torch.cond(x.sum() > 0, lambda x: x, lambda x: x + 1, (x,)), X))
    assert tm.matches(tm.HOP_ALIASING, text) and not tm.matches(tm.COND_INPUT_ALIASING, text)


def test_hop_call_failed_recorded():
    inner = ("RuntimeError when making fake tensor call\\n  Explanation: Dynamo failed to run FX "
             "node with fake tensors: call_function cond(*(FakeTensor(..., size=(), "
             "dtype=torch.bool), GraphModule(), GraphModule(), (FakeTensor(..., size=(4,)),)),"
             " **{}): got RuntimeError(\"When merging two branches\\' output in torch.cond,  "
             "expected same dim but got 1 and 0.\")")
    recorded = ("Observed exception\n  Developer debug context: raised exception "
                f"TorchRuntimeError('{inner}')")
    found = tm.search(tm.HOP_CALL_FAILED, recorded)
    assert found is not None and found.groups()[:2] == ("cond", "RuntimeError")
    assert "expected same dim" in found.group(3)


def test_fake_tensor_call_text():
    """The part of HOP_CALL_FAILED torch 2.14.1 emits on a small program."""
    def ranks(x):
        return torch.cond(x.sum() > 0, lambda x: x + 1, lambda x: (x * 2).sum(), (x,))

    text = str(compile_error(ranks, X))
    assert re.search(r"call_function cond\(.*?\): got RuntimeError\(", text, re.S)


def test_guard_failed_same_frame_recorded():
    recorded = ("Guard failed on the same frame it was created. This is a bug - please create "
                "an issue.Guard fail reason: 0/0: Could not guard on data-dependent expression "
                "u0 > 1")
    assert tm.matches(tm.GUARD_FAILED_SAME_FRAME, recorded)
    assert not tm.matches(tm.GUARD_FAILED_SAME_FRAME, recorded.split("Guard fail reason")[0])
    import torch._dynamo.guards as guards

    assert "Guard failed on the same frame it was created" in inspect.getsource(guards)


# --- torch.export ------------------------------------------------------------------------

@emits("GUARD_ON_DATA")
def test_guard_on_data():

    def reads(x):
        n = x.sum().item()
        return x + 1 if n > 2 else x

    text = str(export_error(reads, X))
    assert tm.matches(tm.GUARD_ON_DATA, text) and not tm.matches(tm.SIZE_LIKE_SYMBOLS, text)
    assert tm.GUARD_ON_DATA_TEXT in text


@emits("SPECIALIZED_INTEGER", "SIZE_LIKE_SYMBOLS")
def test_specialized_integer_and_size_like():

    def loops(x):
        def arm(x):
            for _ in x.nonzero():
                x = x + 1
            return x
        return torch.cond(x.sum() > 0, arm, lambda x: x - 1, (x,))

    text = str(export_error(loops, X))
    assert tm.matches(tm.SPECIALIZED_INTEGER, text)
    assert tm.matches(tm.SIZE_LIKE_SYMBOLS, text)


@emits("CALL_RAISED_SECTION")
def test_call_raised_section():

    def asserts(x):
        torch._assert(x.sum() > 0, "negative")
        return x

    text = str(export_error(asserts, X))
    raised = tm.split_at(tm.CALL_RAISED_SECTION, text)
    assert raised is not None
    assert any(f == __file__ for f, _, _ in tm.frames(raised[1]))


@emits("ATTRIBUTE_ASSIGNED")
def test_attribute_assigned_warning():

    class Sets(torch.nn.Module):
        def forward(self, x):
            self.kept = x * 2
            return x + 1

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.export.export(Sets(), (X,), strict=False)
    # warnings.filterwarnings matches its pattern at the message's start, case-blind
    assert any(re.match(tm.ATTRIBUTE_ASSIGNED.pattern.pattern, str(w.message), re.I)
               for w in seen)


class _Box:
    def __init__(self, t):
        self.t = t


@emits("UNKNOWN_OUTPUT_TYPE")
def test_unknown_output_type():
    found = tm.search(tm.UNKNOWN_OUTPUT_TYPE, str(export_error(_Box, X)))
    assert found is not None and found.group(1).endswith("._Box")


@emits("NUMPY_UNSUPPORTED")
def test_numpy_unsupported():
    text = str(export_error(lambda x: torch.from_numpy(x.numpy()) + 1, X))
    assert tm.matches(tm.NUMPY_UNSUPPORTED, text)


@emits("PENDING_UNBACKED")
def test_pending_unbacked():
    from torch.fx.experimental.symbolic_shapes import PendingUnbackedSymbolNotFound

    assert tm.matches(tm.PENDING_UNBACKED, repr(PendingUnbackedSymbolNotFound("u0")))


# --- an exported program's run -----------------------------------------------------------

def _sized(x):
    if x.shape[0] > 2:
        return x + 1
    return x


@emits("GUARD_FAILED", "GUARD_SOURCE")
def test_guard_failed_and_guard_source():
    ep = torch.export.export(_Wrap(_sized), (torch.ones(4),),
                             dynamic_shapes={"x": {0: torch.export.Dim.AUTO}}, strict=False)
    guards = [g for g in ep._guards_code if tm.matches(tm.GUARD_SOURCE, g)]
    assert guards and tm.GUARD_SOURCE.pattern.sub(r"\1", guards[0]).startswith("x.size()")
    with pytest.raises(AssertionError) as info:
        ep.module()(torch.ones(2))
    assert tm.matches(tm.GUARD_FAILED, str(info.value))


@emits("RUNTIME_ASSERTION")
def test_runtime_assertion():

    def checks(x):
        n = x.sum().item()
        torch._check(n > 0)
        return x + n

    ep = torch.export.export(_Wrap(checks), (torch.ones(4),), strict=False)
    with pytest.raises(RuntimeError) as info:
        ep.module()(-torch.ones(4))
    found = tm.search(tm.RUNTIME_ASSERTION, str(info.value))
    assert found is not None and found.group(1)


# --- elsewhere in torch --------------------------------------------------------------------

@emits("ONNX_CAUSE_LINE")
def test_onnx_cause_lines():
    from torch.onnx._internal.exporter import _core

    try:
        try:
            raise ValueError("inner")
        except ValueError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError as error:
        text = _core._summarize_exception_stack(error)
    causes = [ln for ln in text.splitlines() if tm.matches(tm.ONNX_CAUSE_LINE, ln.strip())]
    assert len(causes) == 2 and "inner" in causes[0]


def test_onnx_translating_recorded():
    recorded = ("<class 'RuntimeError'>: Error when translating node %sort : [num_users=1] = "
                "call_function[target=torch.ops.aten.sort.default](args = (%x,), kwargs = {})"
                ". See the stack trace for more information.")
    found = tm.search(tm.ONNX_TRANSLATING, recorded)
    assert found is not None and recorded[found.start():].startswith("Error when")
    from torch.onnx._internal.exporter import _core

    assert "Error when translating node" in inspect.getsource(_core)


@emits("ASSERT_CLOSE_DETAIL")
def test_assert_close_detail():
    with pytest.raises(AssertionError) as info:
        torch.testing.assert_close(torch.ones(3), torch.zeros(3))
    details = [ln for ln in str(info.value).splitlines()
               if tm.matches(tm.ASSERT_CLOSE_DETAIL, ln.strip())]
    assert len(details) == 3


def test_every_message_is_tested():
    """Every message has a test above that makes torch emit it, or a recorded copy."""
    missing = set(tm.MESSAGES) - LIVE - RECORDED
    assert not missing, f"no test emits {sorted(missing)}"


@emits("COND_OUTPUT_RANK")
def test_cond_output_rank():
    def ranks(x):
        return torch.cond(x.sum() > 0, lambda x: x.sum(0), lambda x: x - 1.0, (x,))

    found = tm.search(tm.COND_OUTPUT_RANK, str(export_error(ranks, X)))
    assert found is not None and found.group(1) == f"{X.dim() - 1} and {X.dim()}"


@emits("WHILE_CARRY_CHANGED")
def test_while_carry_changed():
    from torch._higher_order_ops import while_loop

    def shrinks(x):
        return while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, h.sum(0)),
                          (torch.zeros((), dtype=torch.int64), x))

    found = tm.search(tm.WHILE_CARRY_CHANGED, str(compile_error(shrinks, torch.randn(4, 8))))
    assert found is not None and "shape: torch.Size([8]) vs torch.Size([4, 8])" in \
        found.group(1), found
