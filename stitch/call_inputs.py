"""A program's call checked against the constant inputs it was exported with.

torch.export keeps a non-tensor input (``bias=None``, a flag) as a constant of the graph:
its slot stays a leaf of the input spec, so a later call passing a tensor there is accepted
and the tensor silently ignored (torch 2.14.1: ``ep.module()(x, bias)`` returns the result
without ``bias``). A stitched program refuses such a call instead, saying which input and
how to export for it. Positional inputs the call leaves out, where the program holds
``None`` for them (the model's default), are passed as ``None``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import ConstantArgument, InputKind, TensorArgument


class ConstantInputError(TypeError):
    """A call passed another value where the program holds a constant input (``name``)."""

    def __init__(self, message: str, name: str = "") -> None:
        super().__init__(message)
        self.name = name


class ConstantInputs:
    """Where the exported program holds constant user inputs, and their values."""

    def __init__(self, exported_program: torch.export.ExportedProgram,
                 defaults: dict | None = None) -> None:
        users = [s for s in exported_program.graph_signature.input_specs
                 if s.kind == InputKind.USER_INPUT]
        self.constants = {i: s.arg for i, s in enumerate(users)
                          if isinstance(s.arg, ConstantArgument)}
        self.in_spec = exported_program.call_spec.in_spec
        self.positional = self._positional_count()
        # the model's defaults of the keyword inputs the program takes: a call that leaves
        # one out means the default, as it does for the model
        self.defaults = dict(defaults or {})

    def with_defaults(self, kwargs: dict) -> dict:
        """``kwargs`` with the model's default for each keyword input the program takes and
        the call leaves out."""
        missing = {k: v for k, v in self.defaults.items() if k not in kwargs}
        return {**missing, **kwargs} if missing else kwargs

    def _positional_count(self) -> int | None:
        spec = self.in_spec
        if spec is None or spec.type is not tuple or spec.num_children != 2:
            return None
        args = spec.children()[0]
        return args.num_children if args.type is tuple else None

    def completed(self, args: tuple, kwargs: dict) -> tuple:
        """``args`` with trailing positional inputs the call left out that the program
        holds as ``None`` filled in (only when every one left out is such)."""
        if self.positional is None or len(args) >= self.positional or kwargs:
            return args
        missing = range(len(args), self.positional)
        flat_index = self._flat_positions()
        if flat_index is None or not all(
                flat_index.get(i) in self.constants
                and self.constants[flat_index[i]].value is None for i in missing):
            return args
        return (*args, *([None] * len(missing)))

    def _flat_positions(self) -> dict[int, int] | None:
        """Positional input -> its leaf index, where each positional input is one leaf."""
        args = self.in_spec.children()[0]
        if any(child.num_children for child in args.children()):
            return None
        return {i: i for i in range(args.num_children)}

    def check(self, args: tuple, kwargs: dict) -> None:
        """Raise when a constant input gets another value than the one exported."""
        if not self.constants:
            return
        for arg in self.constants.values():  # a positional input passed by its name
            if arg.name in kwargs:
                self._compare(arg, kwargs[arg.name])
        try:
            from torch.export._tree_utils import reorder_kwargs

            leaves = pytree.tree_leaves((args, reorder_kwargs(kwargs, self.in_spec)),
                                        is_leaf=lambda v: v is None)
        except Exception:  # noqa: BLE001 - another structure: torch's own check says so
            return
        for i, arg in self.constants.items():
            if i >= len(leaves):
                return
            self._compare(arg, leaves[i])

    @staticmethod
    def _compare(arg: ConstantArgument, got: Any) -> None:
        want = arg.value
        if not (got is want or _same(got, want)):
            number = type(want) in (bool, int, float) and type(got) in (bool, int, float)
            raise ConstantInputError(
                f"input {arg.name!r}: this program was exported with {arg.name}={want!r}, a "
                f"constant of its graph, and was called with {_describe(got)}; the graph "
                f"would ignore it. " + (
                    "A Python number is an input of the program where it is a top-level "
                    "argument of forward and the examples differ in it; otherwise export "
                    "one program per value." if number else
                    f"Export with an example that passes {arg.name} as this call does (one "
                    "program per such value)."), arg.name)


def keyword_defaults(forward: Any, exported_program: torch.export.ExportedProgram) -> dict:
    """The defaults of ``forward``'s parameters that the program takes by keyword."""
    import inspect

    spec = exported_program.call_spec.in_spec
    if spec is None or spec.type is not tuple or spec.num_children != 2:
        return {}
    keywords = spec.children()[1]
    names = keywords.context if keywords.type is dict else []
    try:
        parameters = inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return {}
    return {name: parameters[name].default for name in names if name in parameters
            and parameters[name].default is not inspect.Parameter.empty}


def structure_problem(exported_program: torch.export.ExportedProgram, args: tuple,
                      kwargs: dict) -> str | None:
    """What is wrong with a call's inputs against the program's (a missing or extra input,
    ``None`` where a tensor was exported, another nesting), or None when they fit: said in
    the user's terms where a compiled backend answers with its own internals (Dynamo's
    "Attempt to trace generator" for a missing input)."""
    from torch.export._tree_utils import reorder_kwargs

    spec = exported_program.call_spec.in_spec
    names = [s.arg.name for s in exported_program.graph_signature.input_specs
             if s.kind == InputKind.USER_INPUT]
    takes = f"this program takes ({', '.join(names)})"
    try:
        ordered = reorder_kwargs(kwargs, spec)
    except Exception:  # noqa: BLE001 - torch's own message names the keywords
        return (f"{takes}; the call passed keywords {sorted(kwargs)}, which are not the "
                "program's")
    leaves, got = pytree.tree_flatten((tuple(args), ordered))
    if got == spec:
        users = [s for s in exported_program.graph_signature.input_specs
                 if s.kind == InputKind.USER_INPUT]
        for spec_, leaf in zip(users, leaves, strict=False):
            if isinstance(spec_.arg, TensorArgument) and not isinstance(leaf, torch.Tensor):
                return (f"{takes}; input {spec_.arg.name!r} was exported as a tensor and the "
                        f"call passed {_describe(leaf)}")
        return None
    return (f"{takes}; the call passed {len(args)} positional input(s) and keywords "
            f"{sorted(kwargs)} structured otherwise (a missing or extra input, None where a "
            f"tensor was exported, or another nesting): expected {spec}, got {got}")


class SignatureConstants:
    """The same check for a loaded artifact, from the constant inputs its manifest's I/O
    signature records (``{"path": "[0][1]", "constant": None}``): AOTInductor's runner keeps
    only the tensors of a call, and ONNX Runtime's graph has no input for a constant, so a
    tensor or another flag there would be dropped without a word."""

    def __init__(self, signature: dict | None) -> None:
        inputs = (signature or {}).get("inputs", [])
        self.constants = {s["path"]: ConstantArgument(name=s.get("param") or s.get("name")
                                                      or s["path"],
                                                      value=s["constant"])
                          for s in inputs if "constant" in s
                          and isinstance(s["constant"], int | float | bool | str | None)}

    def check(self, args: tuple, kwargs: dict) -> None:
        if not self.constants:
            return
        leaves = dict((pytree.keystr(path), leaf) for path, leaf in pytree.tree_flatten_with_path(
            (tuple(args), dict(kwargs)), is_leaf=lambda v: v is None)[0])
        for path, arg in self.constants.items():
            if path in leaves:  # a trailing input left out keeps the exported value
                ConstantInputs._compare(arg, leaves[path])


def _same(got: Any, want: Any) -> bool:
    if isinstance(got, torch.Tensor) or isinstance(want, torch.Tensor):
        return False
    try:
        return type(got) is type(want) and bool(got == want)
    except Exception:  # noqa: BLE001 - an object without a plain equality
        return False


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a Tensor of shape {tuple(value.shape)}"
    return f"{type(value).__name__} {value!r}"[:80]
