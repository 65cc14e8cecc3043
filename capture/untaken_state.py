"""Counters only a path no example took adds to, and state only such a path sets::

    if torch.isnan(h).any():      # no example has a NaN
        self.skipped += 1         # a counter: replayed when the branch runs

The examples never run the addition, so comparing state before and after them finds no
change. The source does show it: a number (a model attribute, a class attribute, a module
global) that some user code adds to or subtracts from (``+=``, ``-=``, ``x = x + v``). Each
such number the examples leave untouched is probed like a measured counter
(``rebound.Counting`` stands in for it on every example): no example may use it at all. One
that passes is a counter whose additions happen only on paths the examples did not take;
stitch's branch rewrite replays them where the branch runs (a guarded ``add`` entry), and
verification runs each branch side, forced, comparing the number the model and the program
leave. A use of it on any traced path (a read, a print) fails the export instead.

State a branch no example took sets (``self.levels = [h * 0.5, h.mean(0)]``, ``global LAST;
LAST = h``) is found the same way: an attribute or slot a ``forward`` sets in a branch,
holding None or tensors in containers, that no example uses (``rebound.Unset`` stands in for
it); the branch rewrite replays the set where the branch runs (a guarded ``rebind`` entry)."""

from __future__ import annotations

import ast
import functools
import inspect
import os
from collections.abc import Callable

import torch

from .locate import locate_in_class, locate_slot
from .owners import covered, state_owners
from .reachable import Slot, SlotKind
from .rebound import rebindable
from .source import is_user_file, parse_file


def added_names(model: torch.nn.Module) -> frozenset[str]:
    """Names user code adds to or subtracts from, as an attribute (``X.name += v``,
    ``X.name = X.name - v``) or a bare name (a ``global``), in the files of the model's
    module classes."""
    return _names(model)[0]


def set_names(model: torch.nn.Module) -> frozenset[str]:
    """Attribute names a ``forward`` sets in a branch (``if ...: X.name = v``), and names it
    declares ``global`` and sets there: the ``forward`` of the model's module classes (and
    of their bases), and any ``forward`` outside a class, in their files (a narrow net on
    purpose: a stand-in for a library's own state, a mesh or a kernel setting, could change
    the path a trace takes; the heads a library defines beside the model, whose forwards set
    ``config.problem_type``, are not the model's)."""
    return _names(model)[1]


def item_names(model: torch.nn.Module) -> frozenset[str]:
    """Names of the dicts user code sets or adds to items of (``D[k] = v``, ``X.d[k] +=
    v``), in the files of the model's module classes."""
    return _names(model)[2]


def item_keys(model: torch.nn.Module) -> dict[str, frozenset]:
    """Dict name -> the constant keys (str or int) user code sets or adds to items of
    (``D["pair"] = v``), in the files of the model's module classes."""
    out: dict[str, set] = {}
    for name, key in _names(model)[3]:
        out.setdefault(name, set()).add(key)
    return {name: frozenset(keys) for name, keys in out.items()}


@functools.lru_cache(maxsize=64)
def _file_names(file: str, _mtime: float) -> tuple:
    """(added, set, item-holder) names and (holder, constant key) pairs in ``file`` (as of
    its modification time); the set names by the class whose ``forward`` sets them (None: a
    ``forward`` outside a class)."""
    tree = parse_file(file)
    added: set[str] = set()
    sets: dict[str | None, set[str]] = {}
    items: set[str] = set()
    keys: set[tuple] = set()
    owner = {id(f): c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
             for f in c.body} if tree is not None else {}
    _added_in(tree, None, added)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "forward":
            sets.setdefault(owner.get(id(node)), set()).update(_set_in(node))
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AugAssign) else [])
        for t in targets:
            holder = t.value if isinstance(t, ast.Subscript) else None
            named = (holder.id if isinstance(holder, ast.Name)
                     else holder.attr if isinstance(holder, ast.Attribute) else None)
            if named is None:
                continue
            items.add(named)
            key = t.slice.value if isinstance(t.slice, ast.Constant) else None
            if isinstance(key, str | int) and not isinstance(key, bool):
                keys.add((named, key))
    return (frozenset(added), {k: frozenset(v) for k, v in sets.items()}, frozenset(items),
            frozenset(keys))


def _names(model: torch.nn.Module) -> tuple[frozenset[str], ...]:
    classes: dict[str, set[str]] = {}  # file -> names of the model's classes defined there
    for cls in {c for module in model.modules() for c in type(module).__mro__}:
        try:
            file = inspect.getsourcefile(cls)
        except (TypeError, OSError):
            continue
        if file and is_user_file(file):
            classes.setdefault(file, set()).add(cls.__name__)
    found = {file: _file_names(file, _mtime(file)) for file in sorted(classes)}
    sets = frozenset().union(*(names for file, f in found.items() for owner, names in f[1].items()
                               if owner is None or owner in classes[file]))
    return tuple(sets if i == 1 else frozenset().union(*(f[i] for f in found.values()))
                 for i in range(4))


def _added_in(node: ast.AST | None, declared: set[str] | None, added: set[str]) -> None:
    """The names added to or subtracted from under ``node``: an attribute's name
    (``X.name += v``), and a bare name where it is a global (at module level, or declared
    ``global`` in its function: ``declared``, None at module level). A bare name a function
    adds to without declaring it is its local (``found += 1`` in a loop), no state; taken
    for a counter, it would make every reachable number of that name a candidate to probe
    (httpx's ``codes.found``, reachable from transformers)."""
    for child in ast.iter_child_nodes(node) if node is not None else ():
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            _added_in(child, {n for x in ast.walk(child) if isinstance(x, ast.Global)
                              for n in x.names}, added)
            continue
        target = _added_target(child)
        if isinstance(target, ast.Attribute):
            added.add(target.attr)
        elif isinstance(target, ast.Name) and (declared is None or target.id in declared):
            added.add(target.id)
        _added_in(child, declared, added)


def _mtime(file: str) -> float:
    try:
        return os.path.getmtime(file)
    except OSError:
        return 0.0


def _set_in(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Attributes (and declared globals) ``func`` sets inside an ``if``: state a branch
    sets (a set on every path the examples would have shown)."""
    declared = {n for node in ast.walk(func) if isinstance(node, ast.Global)
                for n in node.names}
    out = set()
    for node in (n for branch in ast.walk(func) if isinstance(branch, ast.If)
                 for stmt in branch.body + branch.orelse for n in ast.walk(stmt)):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Attribute):
                    out.add(target.attr)
                elif isinstance(target, ast.Name) and target.id in declared:
                    out.add(target.id)
    return out


def _added_target(node: ast.AST) -> ast.expr | None:
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add | ast.Sub):
        return node.target
    if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Add | ast.Sub):
        target = node.targets[0]
        loaded = ast.dump(target).replace("ctx=Store()", "ctx=Load()")
        if ast.dump(node.value.left) == loaded or ast.dump(node.value.right) == loaded:
            return target
    return None


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def candidates(model: torch.nn.Module, slots: list[Slot], known: set[str]) -> dict:
    """target -> (get, set, start, location, slot) for each number the source adds to that
    is not a counter the examples already showed (``known``)."""
    return _places(model, slots, known, added_names(model), _number, private=True)


def set_candidates(model: torch.nn.Module, slots: list[Slot], known: set[str]) -> dict:
    """The same for each attribute or slot (not private) a forward sets in a branch
    (``set_names``) that holds None or tensors in containers (what a ``rebind`` entry
    sets)."""
    return _places(model, slots, known, set_names(model), _settable, private=False)


def item_candidates(model: torch.nn.Module, slots: list[Slot], known: set[str]) -> dict:
    """The same for each plain dict (a model attribute, a class attribute, a module global)
    user code sets items of."""
    return _places(model, slots, known, item_names(model), lambda v: type(v) is dict,
                   private=True)


def _places(model: torch.nn.Module, slots: list[Slot], known: set[str], names: frozenset[str],
            holds: Callable[[object], bool], private: bool) -> dict:
    """target -> (get, set, start, location, slot): the model's attributes and the class
    and global slots named in ``names`` whose value ``holds``, not in ``known``
    (``private``: names with a leading ``_`` too). ``location()`` finds the line (reading
    the source is most of what this costs, and only the places kept need it)."""
    found: dict[str, tuple] = {}
    for path, module in state_owners(model):
        for name, value in list(vars(module).items()):
            target = f"{path}.{name}" if path else name
            if name in names and holds(value) and target not in known \
                    and not covered(target, known) and (private or not name.startswith("_")):
                found[target] = (
                    lambda m=module, n=name: vars(m).get(n),
                    lambda v, m=module, n=name: object.__setattr__(m, n, v),
                    value, functools.partial(locate_in_class, module, name), None)
    for slot in slots:
        if slot.name in names and slot.kind in (SlotKind.CLASS, SlotKind.GLOBAL) \
                and holds(slot.get()) and slot.target not in known \
                and (private or not slot.name.startswith("_")):
            found[slot.target] = (slot.get, slot.set, slot.get(),
                                  functools.partial(locate_slot, slot), slot)
    return found


def _settable(value) -> bool:
    return value is None or rebindable(value)


_ATTEMPTS = 4  # runs of the examples at most: each use found aborts one


def untouched(run: Callable, places: dict, stand_ins: dict[str, type]) -> list[str]:
    """The targets of ``places`` (from ``candidates``) no example uses: each holds its
    stand-in (``stand_ins[target]``; ``Counting``: additions only; ``Unset``: no use) during
    every example and is left as it was by all of them. A run a use aborts drops the used
    one and runs again, a few times at most (then none is kept: nothing is assumed)."""
    left = dict(places)
    for _attempt in range(_ATTEMPTS):
        if not left:
            return []
        used, failed = _probe(run, left, stand_ins)
        if not failed:
            return [t for t in left if t not in used]
        if not used:  # the model failed for another reason: nothing is known
            return []
        left = {t: v for t, v in left.items() if t not in used}
    return []


def _probe(run: Callable, places: dict, stand_ins: dict[str, type]) -> tuple[set[str], bool]:
    """One run of the examples with a stand-in at each place: (the places some example
    used, whether a use aborted the run); every place is put back."""
    used: set[str] = set()
    installed: dict[str, object] = {}

    def fresh() -> None:
        for target, (_get, put, *_rest) in places.items():
            installed[target] = stand_ins[target](target, used)
            put(installed[target])

    def after_each() -> None:
        for target, (get, *_rest) in places.items():
            if get() is not installed[target]:
                used.add(target)  # added to, set, or replaced: not untouched
        fresh()

    fresh()
    try:
        run(after_each)
    except Exception:  # noqa: BLE001 - a use raised (its name is in ``used``)
        return used, True
    finally:
        for _target, (_get, put, start, *_rest) in places.items():
            put(start)
    return used, False
