"""A ``try``/``except`` that decides a result, said in a verification refusal.

torch.export traces the ``try`` body with fake tensors, which rarely raise where real data
would (``torch.linalg.cholesky`` of a matrix that is not positive-definite): the program
holds the ``try`` body only and cannot catch an error raised in it at run time. Where a
program raised an error the model caught, the refusal names each ``try`` of the model's
modules whose ``except`` catches that error, and what the user can write instead::

    try:                                    L, info = torch.linalg.cholesky_ex(a)
        L = torch.linalg.cholesky(a)   ->   if info.any():  # a data-dependent branch
    except RuntimeError:                        L = torch.linalg.cholesky(a + jitter)
        L = torch.linalg.cholesky(a + jitter)
"""

from __future__ import annotations

import ast
import inspect
import textwrap

import torch

from .errors import VerificationError


def _caught_names(handler: ast.ExceptHandler) -> set[str] | None:
    """The exception class names an ``except`` names (None: a bare ``except``)."""
    if handler.type is None:
        return None
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", "") for t in types}


def catching_tries(model: torch.nn.Module, error: BaseException) -> list[str]:
    """``file:line`` of each ``try`` in the model's module classes whose ``except`` would
    catch ``error`` (by the names of its class and bases)."""
    names = {c.__name__ for c in type(error).__mro__}
    found: list[str] = []
    for cls in dict.fromkeys(type(m) for m in model.modules()):
        if cls.__module__.startswith("torch."):
            continue
        try:
            lines, start = inspect.getsourcelines(cls)
            path = inspect.getsourcefile(cls) or "<unknown>"
            tree = ast.parse(textwrap.dedent("".join(lines)))
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any(
                    (caught := _caught_names(h)) is None or caught & names
                    for h in node.handlers):
                found.append(f"{path}:{start + node.lineno - 1}")
    return list(dict.fromkeys(found))


def with_try_hint(refusal: BaseException, model: torch.nn.Module) -> BaseException:
    """The refusal with a note naming the ``try`` statements that would have caught the
    program's error, where the program raised and the model did not."""
    raised = getattr(refusal, "raised", None)
    if not isinstance(refusal, VerificationError) or raised is None:
        return refusal
    tries = catching_tries(model, raised)
    if tries:
        refusal.add_note(
            f"the model catches {type(raised).__name__} at {', '.join(tries)} (try/except): "
            "torch.export traces the try body only, so the program cannot catch an error "
            "raised in it at run time, and this example takes the except. What you can do: "
            "test for the failure explicitly (e.g. torch.linalg.cholesky_ex's info, "
            "torch.isfinite) so that the choice is a data-dependent if, which stitch turns "
            "into torch.cond.")
    return refusal
