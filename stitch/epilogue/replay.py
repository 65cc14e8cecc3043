"""Replay an epilogue after the graph has run."""

from __future__ import annotations

import functools
import importlib
import logging
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree

from ..errors import StitchError, check_failure
from .call_site import at_site
from .entries import Arg, Entry, Epilogue
from .formatting import render

Printer = Callable[[str, str], None]
SCALARS = {"int": int, "float": float, "bool": bool}


class _Text:
    """Stands in for a traced non-JSON object: prints and formats as it did."""

    def __init__(self, s: str, r: str) -> None:
        self.s, self.r = s, r

    def __str__(self) -> str:
        return self.s

    def __repr__(self) -> str:
        return self.r


SEQUENCES = {"Size": torch.Size, "tuple": tuple, "list": list}


def _value(arg: Arg, outputs: Sequence[Any]) -> Any:
    if arg.kind == "tensor":
        return outputs[arg.output]
    if arg.kind == "scalar":
        return SCALARS[arg.value](outputs[arg.output].item())
    if arg.kind == "const":
        return arg.value
    if arg.kind == "template":
        return render(arg.value, outputs, lambda inner: _value(Arg(**inner), outputs))
    if arg.kind == "mapping":  # a dict of values, rebuilt (logging's mapping argument)
        return {key: _value(Arg(**inner), outputs) for key, inner in arg.value}
    if arg.kind == "sequence":  # torch.Size / tuple / list of sizes, rebuilt
        items = [_value(Arg(**inner), outputs) for inner in arg.value["items"]]
        return SEQUENCES[arg.value["type"]](items)
    return _Text(arg.str_text or "", arg.repr_text or "")


def replay(epilogue: Epilogue, outputs: Sequence[Any], printer: Printer | None = None,
           lists: Callable[[str], list] | None = None) -> None:
    """Make the deferred calls, in order. ``printer(text, stream)`` receives what a ``print``
    would write (a server routes it to logging); by default it goes to stdout/stderr.
    ``lists(target)`` is the list an ``append`` entry appends to, and ``lists.rebind`` sets
    what a ``rebind`` entry sets (a ``ListTargets``)."""
    for entry in epilogue.entries:
        if entry.guard is not None and not bool(outputs[entry.guard]):
            continue  # the branch holding this call did not run
        values = [_value(a, outputs) for a in entry.args]
        if entry.kind == "check":
            if not bool(values[0]):
                raise _failure(entry)
            continue
        if entry.kind == "append":
            if lists is None:
                raise StitchError(f"{entry.location}: the epilogue appends to "
                                  f"{entry.options['target']!r} but this runner has no list "
                                  "targets; call the program (or pass lists=ListTargets())")
            lists(entry.options["target"]).append(values[0])
            continue
        if entry.kind in _STATE_ENTRIES:
            _set_state(entry, values, lists)
            continue
        _replay_one(entry, values, printer)


# state entries: what the runner's targets object must offer, and what the entry does
_STATE_ENTRIES = {"add": "adds to", "set_item": "sets an item of", "rebind": "sets"}


def _set_state(entry: Entry, values: list, lists) -> None:
    """A counter added to, a dict item set, an attribute or slot set again."""
    opts = entry.options
    if not hasattr(lists, entry.kind):
        raise StitchError(f"{entry.location}: the epilogue {_STATE_ENTRIES[entry.kind]} "
                          f"{opts['target']!r} but this runner has no targets; call the "
                          "program (or pass lists=ListTargets())")
    if entry.kind == "add":
        lists.add(opts["target"], values, opts.get("start"), opts.get("key"))
        return
    spec = _spec(opts["spec"])
    value = _sized(pytree.tree_unflatten(values, spec), spec)
    if entry.kind == "set_item":
        lists.set_item(opts["target"], opts["key"], value)
    else:
        lists.rebind(opts["target"], value)


def _sized(value, spec: pytree.TreeSpec):
    """``value`` with each torch.Size the spec names rebuilt as one (torch's pytree gives
    a tuple back: ``self.shape = x.shape`` would come back as another type)."""
    if spec.type is torch.Size:
        return torch.Size(value)
    children = spec.children()
    if not children or spec.type not in (list, tuple, dict):
        return value
    if spec.type is dict:
        return {k: _sized(value[k], c) for k, c in zip(spec.context, children, strict=True)}
    return spec.type(_sized(v, c) for v, c in zip(value, children, strict=True))


@functools.lru_cache(maxsize=256)
def _spec(serialized: str) -> pytree.TreeSpec:
    """A rebind entry's container spec, parsed once (replay runs after every call)."""
    return pytree.treespec_loads(serialized)


def _failure(entry: Entry) -> BaseException:
    opts = entry.options
    failure = check_failure(opts["type"], opts["message"])
    if failure is None:
        raise StitchError(f"{entry.location}: the epilogue's check {opts['site']} failed and "
                          f"names exception type {opts['type']!r}, which is not a builtin "
                          "exception; the artifact was made by another stitch?")
    return failure


def emit(kind: str, values: list, options: dict) -> None:
    """Make one side-effecting call now (used by rewritten branches run eagerly)."""
    _replay_one(Entry(kind, "", (), options), values)


def helper(options: dict) -> Callable | None:
    """The helper a ``call`` entry names: the global ``name`` of module ``module``."""
    module = sys.modules.get(options["module"])
    if module is None:
        try:
            module = importlib.import_module(options["module"])
        except ImportError:
            return None
    return getattr(module, options["name"], None)


def _replay_one(entry: Entry, values: list, printer: Printer | None = None) -> None:
    opts = entry.options
    if entry.kind == "append":  # eager runs of rewritten branches: the list itself
        opts["list"].append(values[0])
    elif entry.kind == "rebind":  # eager runs of rewritten branches: the object itself
        setattr(opts["owner"], opts["attr"], values[0])
    elif entry.kind == "set_item":  # eager runs of rewritten branches: the dict itself
        opts["owner"][opts["attr"]] = values[0]
    elif entry.kind == "add" and isinstance(opts["owner"], dict):  # an item counted
        items, key = opts["owner"], opts["attr"]
        items[key] = (items.get(key, opts["start"]) if "start" in opts else items[key]) \
            + values[0]
    elif entry.kind == "add":  # eager runs of rewritten branches: the counter itself
        setattr(opts["owner"], opts["attr"], getattr(opts["owner"], opts["attr"]) + values[0])
    elif entry.kind == "call":  # a helper whose body prints, logs or appends
        function = opts.get("callable") or helper(opts)
        if function is None:
            raise StitchError(f"{entry.location}: the epilogue calls helper "
                              f"{opts['module']}.{opts['name']}, which this process cannot "
                              "import; import the model's module before running the program")
        at_site(entry.location, function, *values)
    elif entry.kind == "print":
        sep, end = opts.get("sep", " "), opts.get("end", "\n")
        if printer is not None:
            printer(sep.join(str(v) for v in values) + end, opts.get("stream", "stderr"))
            return
        stream = sys.stdout if opts.get("stream") == "stdout" else sys.stderr
        print(*values, sep=sep, end=end, file=stream)
    elif entry.kind == "log" and opts.get("function"):  # ``logging.info(...)`` as called
        at_site(entry.location, getattr(logging, opts["method"]), *values)
    elif entry.kind == "log":  # the record says the model's file, line and function
        logger = logging.getLogger(opts["logger"])
        at_site(entry.location, getattr(logger, opts["method"]), *values)
    elif entry.kind == "warn":
        module_name = opts.get("module") or ""
        module = sys.modules.get(module_name)
        registry = vars(module).setdefault("__warningregistry__", {}) if module else None
        warnings.warn_explicit(str(values[0]), warning_category(opts["category"]), opts["filename"],
                               opts["lineno"], module=module_name or None, registry=registry)


def warning_category(qualified: str) -> type[Warning]:
    """The warning class a recorded ``module.QualName`` names (``UserWarning`` where it
    cannot be imported)."""
    module_name, _, name = qualified.rpartition(".")
    try:
        obj = importlib.import_module(module_name or "builtins")
        for part in name.split("."):
            obj = getattr(obj, part)
        if isinstance(obj, type) and issubclass(obj, Warning):
            return obj
    except (ImportError, AttributeError):
        pass
    return UserWarning
