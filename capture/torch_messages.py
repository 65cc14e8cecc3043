"""torch's and Dynamo's message texts that stitch reads, named in one place.

torch says some things only in prose: the kind of a graph break (Dynamo's ``gb_type`` and
reason), that torch.export stopped on a data-dependent value, that a torch.cond refused
aliased inputs, that an exported program's own guard failed. stitch decides from those
texts, so each one it reads is a ``TorchMessage`` here: a compiled pattern, the torch
component that emits it, and what stitch takes it to mean. Callers ask ``matches(KIND,
text)``, ``search(KIND, text)`` or ``first_of(KINDS, text)`` and never spell torch's words
themselves. ``tests/capture/test_torch_messages.py`` makes the pinned torch emit each one
(or, where that is not cheap, holds a recorded copy), so a torch release that rewords a
message fails there, not somewhere downstream as a silently different decision.

A pattern matches anywhere in the text (``re.search``); ``re.I`` where stitch reads the
text case-blind. Some patterns are loose on purpose (a few words that any of several
messages holds): the note says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class TorchMessage:
    """A text torch emits that stitch reads."""

    pattern: re.Pattern[str]
    emitted_by: str  # the torch component (module or exception) that writes it
    means: str  # what stitch takes it to mean


def _message(pattern: str, emitted_by: str, means: str, flags: int = 0) -> TorchMessage:
    return TorchMessage(re.compile(pattern, flags), emitted_by, means)


# --- Dynamo graph breaks (a break's gb_type and reason) ------------------------------

GRAPH_BREAK_IN_LOOP = _message(
    r"^graph break in loop$", "torch._dynamo.symbolic_convert (gb_type)",
    "Dynamo skipped a frame because a break fell inside a loop; the break it met is named "
    "in the reason (LOOP_BREAK_INNER)", re.I)
LOOP_BREAK_INNER = _message(
    r"Graph break encountered:\s*\n\s*\n?([^\n]+)", "torch._dynamo.symbolic_convert",
    "group 1: the gb_type of the break met inside a skipped loop")
BREAK_PREAMBLE = _message(
    r"^Encountered graph break when attempting to trace", "torch._dynamo.symbolic_convert",
    "the boilerplate first paragraph of a logged break's reason")
DATA_DEPENDENT_BREAK = _message(
    r"data-dependent|data dependent|generic_jump|item\(\)|tolist|scalar|__bool__|nonconst"
    r"|tensor to a python", "torch._dynamo (gb_type of several breaks)",
    "loose: a break on a value read from tensor data (a branch, a scalar read)", re.I)
DATA_DEPENDENT_BRANCHING = _message(
    r"Data-dependent branching", "torch._dynamo.symbolic_convert (gb_type)",
    "an `if`/`while` on a tensor's value")
BRANCHING_WORDS = _message(
    r"branching|generic_jump", "torch._dynamo.symbolic_convert",
    "loose: a break at a jump on a tensor (generic_jump: older torch's wording)", re.I)
TENSOR_ITEM = _message(
    r"Tensor\.item\(\)", "torch._dynamo.variables.tensor (gb_type)",
    "`.item()` read a tensor into Python")
SCALAR_READ_NOT_CAPTURED = _message(
    r"capture_scalar_outputs=False", "torch._dynamo.variables.tensor (gb_type)",
    "a tensor read as a Python number with scalar capture off")
CAPTURE_CONFIG_HINT = _message(
    r"capture_dynamic_output_shape_ops|capture_scalar_outputs", "torch._dynamo (hints)",
    "Dynamo's hint to turn on data-dependent capture (a shape or scalar read)")
SCALAR_IN_OP = _message(
    r"_local_scalar_dense", "torch._dynamo (reason at an op sized by a tensor)",
    "an op read a tensor as a Python number (aten._local_scalar_dense)")
DYNAMIC_SHAPE_OPERATOR = _message(
    r"Dynamic shape operator", "torch._dynamo.utils (gb_type)",
    "an op whose output shape depends on data (nonzero, unique ...)", re.I)
DATA_DEPENDENT_OPERATOR = _message(
    r"Data dependent operator", "torch._dynamo.utils (gb_type)",
    "an op whose non-tensor output depends on data (torch.equal ...)", re.I)
DATA_DEPENDENT_PYTHON_VALUE = _message(
    r"non-Tensor output whose value is dependent on the data",
    "torch._dynamo.utils (explanation)",
    "the op returns a Python value computed from data (torch.equal, torch.allclose)", re.I)
LOGGER_CALL = _message(
    r"logging\.logger", "torch._dynamo.variables (gb_type)",
    "a logging.Logger method Dynamo does not trace", re.I)
UNTRACEABLE_CALL = _message(
    r"skip|disable|unsupported|builtin|call_function|not supported|failed to trace",
    "torch._dynamo (gb_type and reason of several breaks)",
    "loose: a call Dynamo does not trace (skipped, disabled, unsupported builtin)", re.I)
COMPILER_DISABLE = _message(
    r"torch\.compiler\.disable", "torch._dynamo.variables.functions (explanation)",
    "a call of a torch.compiler.disable'd function")
RNN_WRAP = _message(
    r"Attempted to wrap RNN", "torch._dynamo.variables.nn_module (gb_type)",
    "an nn.LSTM/GRU/RNN call with allow_rnn off")
EXPECTED_BOOL_FAKE = _message(
    r"Expected bool, got FakeTensor", "torch.fx.experimental.symbolic_shapes",
    "a traced branch read a tensor as a truth value (an `assert <tensor>` in a cond arm)")
GENERIC_CONTEXT_BREAK = _message(
    r"Graph break under GenericContextWrappingVariable", "torch._dynamo.symbolic_convert",
    "a break under a context manager Dynamo cannot break in: the break's own text is lost")

# --- sections of torch's error texts -------------------------------------------------

USER_CODE_SECTION = _message(
    r"\n*from user code:", "torch._dynamo.exc (appended to errors)",
    "the user frames Dynamo traced follow (innermost last)")
CALL_RAISED_SECTION = _message(
    r"The following call raised this error:",
    "torch.fx.experimental.symbolic_shapes._blame_user_code",
    "the user frame a data-dependent guard came from follows")
TRACEBACK_FRAME = _message(
    r'File "([^"]+)", line (\d+), in (\S+)', "traceback lines inside torch's errors",
    "groups: file, line, function")
EXPLANATION = _message(
    r" Explanation:", "torch._dynamo.exc (unimplemented)",
    "the explanation after a break's one-line gb_type")
HIGHER_ORDER_OP_LINE = _message(
    r"^Higher Order Operator:", "torch._dynamo.exc (a line of a HOP's break)",
    "names the operator; says nothing about the break")

# --- torch.cond / while_loop ---------------------------------------------------------

HIGHER_ORDER_OP_ERROR = _message(
    r"higher order operator", "torch._dynamo.exc.UncapturedHigherOrderOpError",
    "a torch.cond/while_loop arm could not be captured whole", re.I)
COND_REFUSED = _message(
    r"Got graph break/error:\s*(torch\.cond[^\n]*)",
    "torch._dynamo.variables.higher_order_ops",
    "group 1: torch.cond's own refusal (improper operands, branch return type ...)")
HOP_CALL_FAILED = _message(
    r"call_function (cond|while_loop)\(.*?\): got (\w+)\((.+?)\)'\)",
    "torch._dynamo (Observed exception, raised while running a HOP on fake tensors)",
    "groups: the operator, the exception type, its message", re.S)
COND_INPUT_ALIASING = _message(
    r"input-to-input aliasing", "torch._dynamo.variables.higher_order_ops",
    "two torch.cond operands share memory", re.I)
HOP_ALIASING = _message(
    r"alias", "torch._dynamo.variables.higher_order_ops / torch._higher_order_ops",
    "loose: a cond/while_loop refused aliasing (input-input or input-output)", re.I)
WHILE_CARRY_CHANGED = _message(
    r"Expected body_fn_output and carried_inputs to have same metadata but found:\s*"
    r"(.+?)(?:, where lhs|\s+from user code|$)",
    "torch._higher_order_ops.while_loop (checked while Dynamo traces the body)",
    "group 1: which carried value differs, and how (shape, stride, dtype)", re.S)
GUARD_FAILED_SAME_FRAME = _message(
    r"(?s)^(?=.*Guard failed on the same frame)(?=.*data-dependent)",
    "torch._dynamo.guards.CheckFunctionManager",
    "Dynamo's check of a frame's guards could not decide a data-dependent one")

# --- torch.export --------------------------------------------------------------------

# stitch writes this phrase itself for a failure draft_export reports (no text of torch's)
GUARD_ON_DATA_TEXT = "Could not guard on data-dependent expression"
GUARD_ON_DATA = _message(
    re.escape(GUARD_ON_DATA_TEXT),
    "torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode",
    "the trace needed a Python bool of a value from data", re.I)
SPECIALIZED_INTEGER = _message(
    r"Could not extract specialized integer from data-dependent expression",
    "torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode",
    "the trace needed a Python int of a value from data (a range, a size)", re.I)
SIZE_LIKE_SYMBOLS = _message(
    r"Size-like symbols: (?!none)", "torch.fx.experimental.symbolic_shapes",
    "the failed guard involves a size from data (nonzero, a mask)")
ATTRIBUTE_ASSIGNED = _message(
    r"The tensor attributes? .* (was|were) assigned during export",
    "torch.export (a UserWarning)",
    "the forward set a tensor attribute; a pattern for warnings.filterwarnings")
UNKNOWN_OUTPUT_TYPE = _message(
    r"Found <class '([\w.]+)'> in output, which is not a known type",
    "torch.utils._pytree (via torch.export)", "group 1: the unregistered class returned")
PENDING_UNBACKED = _message(
    r"PendingUnbackedSymbolNotFound", "torch.fx.experimental.symbolic_shapes",
    "a value read from data inside a torch.cond arm cannot leave it")
COND_OUTPUT_RANK = _message(
    r"When merging two branches' output in torch\.cond,\s*expected same dim but got "
    r"(\d+ and \d+)", "torch._higher_order_ops.cond (merging the arms' outputs)",
    "group 1: the ranks the two arms give one output")
NUMPY_UNSUPPORTED = _message(
    r"\.numpy\(\) is not supported", "torch._subclasses (fake tensors)",
    "the forward converts a traced tensor to NumPy")

# --- an exported program run ---------------------------------------------------------

GUARD_FAILED = _message(
    r"^Guard failed", "torch.export (ExportedProgram.module()'s input guards)",
    "an input's size or value differs from what the program was specialised to")
RUNTIME_ASSERTION = _message(
    r"Runtime assertion failed for expression (.+?) on node",
    "torch.fx (an exported program's runtime asserts)",
    "group 1: the fact (`Ne(u2, 0)`) the run contradicted")
GUARD_SOURCE = _message(
    r"L\['([^']+)'\]", "torch._dynamo.guards (ExportedProgram._guards_code)",
    "group 1: the input a guard names")

# --- elsewhere in torch --------------------------------------------------------------

ONNX_CAUSE_LINE = _message(
    r"^<class ", "torch.onnx exporter (_summarize_exception_stack)",
    "a line naming one exception of the chain (`<class 'X'>: message`)")
ONNX_TRANSLATING = _message(
    r"Error when translating node", "torch.onnx exporter (_core)",
    "the node the exporter failed on follows")
ASSERT_CLOSE_DETAIL = _message(
    r"^(Greatest|Mismatched)", "torch.testing.assert_close",
    "a line giving the greatest differences or the mismatched count")


def _registry() -> dict[str, TorchMessage]:
    return {name: value for name, value in globals().items()
            if isinstance(value, TorchMessage)}


MESSAGES: dict[str, TorchMessage] = _registry()  # every message above, by name


def search(kind: TorchMessage, text: str) -> re.Match[str] | None:
    """Where ``kind`` occurs in ``text`` (its groups, where it has some)."""
    return kind.pattern.search(text)


def matches(kind: TorchMessage, text: str) -> bool:
    return kind.pattern.search(text) is not None


def first_of(kinds: Iterable[TorchMessage], text: str) -> TorchMessage | None:
    """The first of ``kinds`` that occurs in ``text``."""
    return next((k for k in kinds if k.pattern.search(text)), None)


def first_found(kinds: Iterable[TorchMessage], text: str) -> str | None:
    """The text matched by the first of ``kinds`` that occurs in ``text``."""
    return next((m.group(0) for k in kinds if (m := k.pattern.search(text)) is not None), None)


def split_at(kind: TorchMessage, text: str) -> tuple[str, str] | None:
    """``text`` before and after the first occurrence of ``kind`` (None: it has none)."""
    found = kind.pattern.search(text)
    return None if found is None else (text[:found.start()], text[found.end():])


def before(kind: TorchMessage, text: str) -> str:
    """``text`` up to the first occurrence of ``kind`` (all of it where there is none)."""
    found = kind.pattern.search(text)
    return text if found is None else text[:found.start()]


def frames(text: str) -> list[tuple[str, int, str]]:
    """(file, line, function) of each traceback line in ``text``."""
    return [(f, int(ln), name) for f, ln, name in TRACEBACK_FRAME.pattern.findall(text)]


# what torch says when the forward needs a Python value of a traced tensor or size
DATA_DEPENDENT_STOPS = (GUARD_ON_DATA, SPECIALIZED_INTEGER, EXPECTED_BOOL_FAKE,
                        DATA_DEPENDENT_BRANCHING, TENSOR_ITEM)
