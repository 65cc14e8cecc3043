"""Reads, inside a cond arm, of a list whose appends stitch replays after the graph.

    if x.sum() > 0:
        HISTORY.append(x.shape[0])     # deferred: an epilogue entry
    elif HISTORY:                      # read while torch.cond traces the arm
        HISTORY.pop()

torch.cond traces each arm with Dynamo, which reads the list as it is while tracing (the
examples' state, never grown by the deferred appends) and folds the test: the program never
pops, whatever the calls appended. The same read made by the model's own code at the top
level reaches ``epilogue/record_lists.RecordingList``, which refuses it; in an arm no Python read
happens, so the source is checked instead: any use of such a list in an arm other than
``.append``/``.extend`` (its truth, length, an item, another method) refuses the rewrite,
naming the line. The lists are those appended to in the arms themselves (a branch no example
took) and those the examples showed the forward appending to (``epilogue/targets.APPENDED``).
"""

from __future__ import annotations

import ast

from ...epilogue.targets import APPENDED, is_shared
from ..analysis.names import is_rt_call, walk_local

_GROWING = ("append", "extend")


def _outlives(receiver: ast.expr, local: frozenset[str]) -> bool:
    """A receiver the call does not own: an attribute chain, or a name not bound here."""
    if isinstance(receiver, ast.Name):
        return receiver.id not in local and receiver.id != "self"
    return isinstance(receiver, ast.Attribute)


def _on_self(node: ast.expr) -> bool:
    """``self``, ``self.sub``, ``type(self)``, ``self.__class__``: where the model keeps a
    list attribute (not ``out.outputs`` of some other object)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "type" and node.args:
        node = node.args[0]
    return isinstance(node, ast.Name) and node.id == "self"


def list_reads(arms: list[ast.stmt], local: frozenset[str], filename: str,
               what: str = "branch", tracer: str = "torch.cond") -> str | None:
    """Why the arms (a loop's body and test: ``what``, ``tracer``) cannot become a cond (a
    deferred list used other than by append, with its line), or None."""
    growing = {}  # id(node) of append/extend receivers -> dump
    for node in walk_local(arms):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in _GROWING and _outlives(node.func.value, local):
            growing[id(node.func.value)] = ast.dump(node.func.value)
    dumps = set(growing.values())
    names = {t.rpartition(".")[2] for t in APPENDED if is_shared(t)}
    attrs = {t.rpartition(".")[2] for t in APPENDED}
    called = {id(n.func) for n in walk_local(arms) if isinstance(n, ast.Call)}
    # the list a deferred append names to the runtime (a cond with effects nested in the
    # arms, rewritten already): handed on, not read
    handed = {id(k.value) for n in walk_local(arms) if is_rt_call(n, "effect_options")
              for k in n.keywords if k.arg == "target"}
    for node in walk_local(arms):
        if id(node) in growing or id(node) in called or id(node) in handed \
                or not isinstance(getattr(node, "ctx", None), ast.Load):
            continue  # an append's receiver; a call (`torch.log(x)`, `x.values()`)
        hit = (ast.dump(node) in dumps
               or (isinstance(node, ast.Name) and node.id in names and node.id not in local)
               or (isinstance(node, ast.Attribute) and node.attr in attrs
                   and _on_self(node.value)))
        if hit:
            shown = ast.unparse(node)
            return (f"{filename}:{node.lineno}: the {what} uses list `{shown}` other than by "
                    f"append, and stitch replays that list's appends after the graph: {tracer} "
                    f"traces the {what} reading the list as it was when traced, never as the "
                    "calls grow it (a test of its length or truth would be decided once). Keep the "
                    f"state in a buffer, or return what the {what} reads")
    return None
