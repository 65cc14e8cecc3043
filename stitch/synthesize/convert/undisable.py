"""A call of a function under ``torch.compiler.disable`` is traced as written.

``@torch.compiler.disable`` (also ``recursive=False``, transformers 4.52's
``Llama4TextModel._update_causal_mask``) makes Dynamo skip the function: a graph break at
every call, and torch.export refuses the model ("Non-recursive torch.compiler.disable is
not supported with torch.export"). The decorator changes nothing the function computes,
only who may trace it: while stitch exports, the function itself is installed in place of
the wrapper, so its code is traced like any other (its own breaks, if any, are found by the
next census and rewritten), and the program is verified like any other::

    @torch.compiler.disable(recursive=False)      (installed while exporting)
    def _update_causal_mask(self, ...):    ->      def _update_causal_mask(self, ...):
        ...                                            ...

The census names the call site ("Skip inlining `torch.compiler.disable()`d function"); the
callee is found from that statement: ``self.name(...)`` on the classes of the modules that
ran it, ``name(...)`` and ``module.name(...)`` in the caller's module.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import replace

from capture import BreakKind, BreakSite
from capture import torch_messages as tm
from capture.source import module_of_file, statement_at

from ...errors import StitchError
from ...plan import Action, Decision
from .functions import Target, find_target


def is_disabled_call(site: BreakSite) -> bool:
    """A break Dynamo makes at a call of a ``torch.compiler.disable``d function."""
    return site.kind == BreakKind.UNSUPPORTED_CALL and tm.matches(tm.COMPILER_DISABLE,
                                                                  site.reason)


def is_disabled(fn) -> bool:
    fn = fn.__func__ if isinstance(fn, staticmethod | classmethod) else fn
    return bool(getattr(fn, "_torchdynamo_disable", False))


def disabled_callees(site: BreakSite, work) -> list[Target]:
    """Targets for the disabled functions the statement at ``site`` calls (their rewrite
    is the function itself, unwrapped), or [] when none is found."""
    statement = statement_at(site.filename, site.lineno)
    node = statement.node if statement is not None else None
    if node is None:
        return []
    found: dict[tuple[str, int], Target] = {}
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        for fn in _resolved(call.func, site, work):
            if not is_disabled(fn):
                continue
            base = inspect.unwrap(fn.__func__ if isinstance(fn, staticmethod | classmethod)
                                  else fn)
            code = getattr(base, "__code__", None)
            if code is None:
                continue
            callee = replace(site, filename=code.co_filename, lineno=code.co_firstlineno,
                             function=base.__qualname__)
            try:
                target = find_target(callee, work)
            except StitchError:
                continue
            found.setdefault(target.key, replace(target, sites=[]))
    return list(found.values())


def _resolved(func: ast.expr, site: BreakSite, work) -> list:
    """What a call's function expression may name, without running anything."""
    module = module_of_file(site.filename)
    names = vars(module) if module is not None else {}
    if isinstance(func, ast.Name):
        return [names[func.id]] if func.id in names else []
    if not isinstance(func, ast.Attribute):
        return []
    if isinstance(func.value, ast.Name) and func.value.id == "self":
        out = []
        for path in site.module_paths or ("",):
            try:
                owner = work.get_submodule(path) if path else work
            except AttributeError:
                continue
            for cls in type(owner).__mro__:
                if func.attr in vars(cls):
                    out.append(vars(cls)[func.attr])
                    break
        return out
    if isinstance(func.value, ast.Name) and func.value.id in names:
        held = getattr(names[func.value.id], func.attr, None)
        return [held] if held is not None else []
    return []


def undisabled(site: BreakSite, work, targets, round_no: int) -> Decision:
    callees = disabled_callees(site, work)
    for target in callees:
        targets.setdefault(target.key, target)
    if not callees:
        return _left(site, "the called function is under torch.compiler.disable, and stitch "
                    "could not find which (a call through a variable or a container)",
                    round_no)
    names = ", ".join(t.qualname for t in callees)
    return Decision(Action.UNDISABLED, site.location, site.function,
                    f"{names} is under torch.compiler.disable, which changes nothing it "
                    "computes: installed unwrapped while exporting, its code is traced as "
                    "written (its own breaks rewritten like any other)", site.id, round_no)


def _left(site: BreakSite, reason: str, round_no: int) -> Decision:
    return Decision(Action.LEFT, site.location, site.function, reason, site.id, round_no)
