"""Python numbers that differ among the examples, taken by the program as inputs.

torch.export keeps a Python ``float``, ``int`` or ``bool`` argument as a constant of the
graph: exported with ``conditioning_scale=0.5``, the program holds 0.5 and is refused a call
with 1.0. Where a top-level argument of ``forward`` is a Python number in every example and
its value differs among them, the program takes it as a 0-d tensor (float64, int64 or bool:
every value of the type, exactly) and the traced module reads it back as a number
(``.item()``: an unbacked SymFloat, SymInt or SymBool under torch.export), so the model's
code sees a number, as in eager::

    before: graph(x)               mul(linear(x), 0.5)    (scale=1.0 refused)
    after:  graph(x, scale: f64[]) s = item(scale); mul(linear(x), s)

Callers still pass the number: ``graph_inputs`` makes it the 0-d tensor, in
``running.run_with_epilogue`` (the program, its verification, every backend and loaded
artifact; the epilogue carries the ``NumberInput``s). Arguments equal in every example stay
constants. Where the program with the number as an input is refused (a shape or a Python
``if`` depends on it), the export is made again with the examples' numbers as constants, as
torch.export alone would, and the refusal names the argument, its values and why
(``numbers_as_inputs``).
"""

from __future__ import annotations

import contextlib
import inspect
import numbers
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind

from capture.inputs import Example

from .call_inputs import ConstantInputError
from .errors import StitchError, VerificationError

DTYPES = {"float": torch.float64, "int": torch.int64, "bool": torch.bool}
_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_A = {"float": "a float", "int": "an int", "bool": "a bool"}


@dataclass(frozen=True)
class NumberInput:
    """One argument of ``forward`` the program takes as a 0-d tensor."""

    name: str  # the parameter's name
    position: int | None  # its index among forward's positional parameters (None: keyword-only)
    kind: str  # "float" | "int" | "bool": the Python type the model sees
    values: tuple = ()  # each example's value, in the user's order (for messages)
    default: Any = None  # forward's default, filled in where a call leaves the input out
    keyword: bool = False  # the examples pass it by keyword

    def to_json(self) -> dict:
        return {"name": self.name, "position": self.position, "kind": self.kind,
                "values": list(self.values), "default": self.default, "keyword": self.keyword}

    @staticmethod
    def from_json(data: dict) -> NumberInput:
        return NumberInput(data["name"], data.get("position"), data["kind"],
                           tuple(data.get("values", ())), data.get("default"),
                           bool(data.get("keyword", False)))

    def where(self, args: tuple, kwargs: dict) -> tuple[str, Any] | None:
        """``("kwargs", name)`` or ``("args", index)``: where a call holds this input."""
        if self.name in kwargs:
            return "kwargs", self.name
        if self.position is not None and self.position < len(args):
            return "args", self.position
        return None


# the numbers the export under way takes as inputs (set by ``taking``)
TAKEN: ContextVar[tuple[NumberInput, ...]] = ContextVar("stitch_number_inputs", default=())


@contextlib.contextmanager
def taking(inputs: tuple[NumberInput, ...]) -> Iterator[None]:
    token = TAKEN.set(tuple(inputs))
    try:
        yield
    finally:
        TAKEN.reset(token)


def _kind(values: list) -> str | None:
    """The one kind a parameter's values share: ints and floats together are floats (the
    program then gives the model the float of an int); a bool among other numbers, or an
    int past int64, is none."""
    if not all(isinstance(v, bool | int | float) for v in values):
        return None
    if all(type(v) is bool for v in values):
        return "bool"
    if any(type(v) is bool for v in values):
        return None
    if all(type(v) is int for v in values):
        return "int" if all(_INT64[0] <= v <= _INT64[1] for v in values) else None
    return "float"


def differing_numbers(model: torch.nn.Module, inputs: list[Example]
                      ) -> tuple[NumberInput, ...]:
    """The top-level arguments of ``forward`` that are Python numbers in every example and
    differ among them (by type or value); none for fewer than two examples."""
    if len(inputs) < 2:
        return ()
    try:
        signature = inspect.signature(model.forward)
        bound = [signature.bind(*ex.args, **ex.kwargs).arguments for ex in inputs]
    except (TypeError, ValueError):
        return ()
    positional = [name for name, p in signature.parameters.items()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    found = []
    for name, parameter in signature.parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD) or any(
                name not in b for b in bound):
            continue
        values = [b[name] for b in bound]
        kind = _kind(values)
        if kind is None or len({(type(v), v) for v in values}) < 2:
            continue
        default = parameter.default
        found.append(NumberInput(
            name, positional.index(name) if name in positional else None, kind,
            tuple(values), default if isinstance(default, bool | int | float) else None,
            name in inputs[0].kwargs))
    return tuple(found)


def _as_tensor(number: NumberInput, value: Any) -> Any:
    dtype = DTYPES[number.kind]
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.dim() == 0 and value.dtype != dtype else value
    fits = {"bool": isinstance(value, bool),
            "int": isinstance(value, numbers.Integral) and not isinstance(value, bool),
            "float": isinstance(value, numbers.Real) and not isinstance(value, bool)}
    if not fits[number.kind]:
        raise TypeError(f"input {number.name!r}: the program takes {_A[number.kind]} there at "
                        f"run time (the examples gave {_listed(number.values)}); the call "
                        f"passed {type(value).__name__} {value!r}"[:300])
    try:
        return torch.tensor(value, dtype=dtype)
    except (RuntimeError, OverflowError) as e:
        raise TypeError(f"input {number.name!r}: {value!r} does not fit the program's "
                        f"{dtype} input: {e}") from None


def graph_inputs(inputs: tuple[NumberInput, ...], args: tuple, kwargs: dict
                 ) -> tuple[tuple, dict]:
    """A call's inputs as the graph takes them: each number input a 0-d tensor (a tensor
    passed there is kept, cast to the input's dtype), forward's default where the call
    leaves a keyword input out."""
    if not inputs:
        return args, kwargs
    args, kwargs = list(args), dict(kwargs)
    for number in inputs:
        at = number.where(args, kwargs)
        if at is None:  # left out: its default, where the program takes it by keyword
            if not number.keyword or number.default is None:
                continue
            kwargs[number.name] = number.default
            at = ("kwargs", number.name)
        holder = args if at[0] == "args" else kwargs
        holder[at[1]] = _as_tensor(number, holder[at[1]])
    return tuple(args), kwargs


def model_inputs(inputs: tuple[NumberInput, ...], args: tuple, kwargs: dict
                 ) -> tuple[tuple, dict]:
    """The graph's inputs as the model takes them: each number input's 0-d tensor read
    back as a Python number (under torch.export, a symbolic one); numbers are kept."""
    if not inputs:
        return args, kwargs
    args, kwargs = list(args), dict(kwargs)
    for number in inputs:
        at = number.where(args, kwargs)
        holder = args if at is not None and at[0] == "args" else kwargs
        if at is not None and isinstance(holder[at[1]], torch.Tensor):
            holder[at[1]] = holder[at[1]].item()
    return tuple(args), kwargs


def graph_example(inputs: tuple[NumberInput, ...], ex: Example) -> Example:
    """``ex`` as the graph takes it (``graph_inputs``)."""
    if not inputs:
        return ex
    args, kwargs = graph_inputs(inputs, ex.args, ex.kwargs)
    return replace(ex, args=args, kwargs=kwargs)


def number_reads(ep: torch.export.ExportedProgram, inputs: tuple[NumberInput, ...]
                 ) -> dict[str, NumberInput]:
    """The graph's placeholders that are number inputs, by name: their ``item`` reads are
    the model's numbers, not values read from data."""
    if not inputs:
        return {}
    users = [s.arg.name for s in ep.graph_signature.input_specs
             if s.kind == InputKind.USER_INPUT]
    try:
        args, kwargs = pytree.tree_unflatten(users, ep.call_spec.in_spec)
    except Exception:  # noqa: BLE001 - another call structure: no read is exempt
        return {}
    found = {}
    for number in inputs:
        at = number.where(tuple(args), dict(kwargs))
        if at is not None:
            found[(args if at[0] == "args" else kwargs)[at[1]]] = number
    return found


def note(inputs: tuple[NumberInput, ...]) -> str:
    """The report's note on the inputs taken as numbers."""
    described = "; ".join(
        f"{n.name} ({n.kind}, a 0-d {str(DTYPES[n.kind]).removeprefix('torch.')} tensor in "
        f"the graph: {_listed(n.values)})" for n in inputs)
    return ("Python numbers that differ among the examples, taken as run-time inputs and "
            f"read back as numbers in the graph: {described}. The program, its backends and "
            "artifacts take the number (or that tensor) at call time (verified on every "
            "example)")


def _listed(values: tuple) -> str:
    return ", ".join(f"{v!r} in example {i}" for i, v in enumerate(values))


def numbers_as_inputs(inputs: tuple[NumberInput, ...], export: Callable[[], Any]) -> Any:
    """``export()`` with ``inputs`` taken as run-time inputs; where that fails, ``export()``
    with them as constants, as torch.export keeps them. A refusal of that one for a constant
    alone says which argument, its values, why it could not be an input, and what to change;
    any other refusal is raised as it is, noting the first attempt."""
    if not inputs:
        return export()
    with taking(inputs):
        try:
            return export()
        except Exception as error:  # noqa: BLE001 - whatever it was, constants are tried
            first = error
    with taking(()):
        try:
            return export()
        except VerificationError as error:
            if not isinstance(error.raised, ConstantInputError):
                error.add_note(_tried(inputs, first))
                raise
            if _other_constant(first, inputs):
                # the examples differ in an input no one program takes both ways (None in
                # one, a tensor in another): that refused the first program, not the numbers
                raise first from None
            raise VerificationError(_refusal(inputs, first), raised=error.raised) from first
        except StitchError as error:
            error.add_note(_tried(inputs, first))
            raise


def _other_constant(error: BaseException, inputs: tuple[NumberInput, ...]) -> bool:
    """Whether ``error`` is a verification failure on a constant input other than the
    numbers made run-time inputs."""
    raised = getattr(error, "raised", None)
    return isinstance(error, VerificationError) and isinstance(raised, ConstantInputError) \
        and bool(raised.name) and raised.name not in {n.name for n in inputs}


def _gist(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {(lines or [''])[0][:400]}"


def _tried(inputs: tuple[NumberInput, ...], first: BaseException) -> str:
    names = ", ".join(n.name for n in inputs)
    return (f"tried first: {names} (Python numbers that differ among the examples) as "
            f"run-time inputs of the program; refused: {_gist(first)}")


def _refusal(inputs: tuple[NumberInput, ...], first: BaseException) -> str:
    described = "; ".join(f"{n.name!r} ({n.kind}): {_listed(n.values)}" for n in inputs)
    names = ", ".join(n.name for n in inputs)
    return (
        f"inputs that are Python numbers differ among the examples: {described}. "
        "torch.export keeps a Python number as a constant, so a program holds one value; "
        "stitch makes such a number a run-time input (a 0-d tensor read back with .item(): "
        "an unbacked symbol under torch.export), and that program was refused: "
        f"{_gist(first)}. Such a number can feed arithmetic and tests stitch turns into "
        "conds, but not a Python loop's count (`range(n)`), an index into a Python "
        "container (a ModuleList, a dict), or another value torch.export must know when "
        f"tracing. What you can do: compute with {names} in tensor ops there (a mask or "
        "torch.where instead of picking by index), or export one program per value "
        "(examples that agree on it; each program then takes that value only).")
