"""synthesize: rewrite the functions that break into graph-friendly Python.

``analysis`` reads code, ``operators`` run in rewritten code, ``canonicalize`` puts each
construct's spellings into one form, ``convert`` turns control flow and Python state into
operator calls and installs the rewritten functions. ``convert/passes.py`` is the list of
passes, in the order they run.
"""

from __future__ import annotations

from .analysis.context import RewriteContext, RewriteRefused
from .convert.passes import PASSES, rewrite

__all__ = ["PASSES", "RewriteContext", "RewriteRefused", "rewrite"]
