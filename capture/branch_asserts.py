"""Runtime assertions made inside a ``torch.cond`` arm, kept to that arm.

torch 2.14 traces both arms of a cond in the one ShapeEnv, and a runtime assertion made while
tracing an arm (a reshape's divisibility, a size that must not be 0) is placed in the whole
graph, checked on every call whichever side runs (pytorch/pytorch#165912; PRs #166294 and
#186210 fix it upstream, neither is in 2.14.1). A cond whose predicate is a size (``if n > 0``
on an unbacked count) then fails on inputs its other side handles::

    before:  _assert_scalar(Ne(u0, 0))             # from the true arm
             _assert_scalar(Eq(Mod(6*u0, 4), 0))   # from the false arm
             cond(u0 > 0, true_graph, false_graph, ...)
    after:   _assert_scalar((u0 <= 0) | Ne(u0, 0))
             _assert_scalar((u0 > 0) | Eq(Mod(6*u0, 4), 0))

While ``branch_local_asserts()`` is active, an assertion made while an arm is traced is
asserted as "this arm is not taken, or the assertion holds", when the assertion is about a
symbol of the arm's predicate (the size the arm is chosen by). Arms are found on the Python
stack, in the four places torch traces them: Dynamo's ``speculate_branch`` (torch.compile,
and torch.export's capture of a cond), ``trace_cond`` (make_fx, which AOTAutograd and
torch.export's non-strict path run), ``cond_fake_tensor_mode`` (the cond run on fake
tensors for its output shapes) and ``gen_schema`` (Dynamo running the cond node on fake
values), the arm told apart by the frame's own locals. A guard torch cannot decide is
decided in an arm where the arms' size tests decide it (``arm_ranges``). Each
enclosing cond whose predicate is symbolic (a SymBool, or a 0-d tensor made from one: found
through the graph) adds its condition; a predicate computed from tensor data adds none, so the
assertion is then checked more often than needed, never less. The arm's ops need these facts
only when the arm runs, and the model runs the same ops there. What is lost: the ShapeEnv no
longer refines the predicate's ranges from an arm's assertion; stitch's arms re-state their
test on their own values instead (stitch/synthesize/canonicalize/arm_facts.py).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, ShapeEnv

from .arm_ranges import decided_in_arm
from .branch_truths import known_truth, remember_truth, truth_of_node, unless_constant
from .reentrant import Reentrant
from .size_tests import note_guard_lines

# the frames this module reads, and the local names it reads in them
_MAKE_FX = ("torch._higher_order_ops.cond", "trace_cond", {"pred", "true_graph", "false_graph"})
_FAKE = ("torch._higher_order_ops.cond", "cond_fake_tensor_mode",
         {"pred", "flat_true_outs", "flat_false_outs"})
_DYNAMO = ("torch._dynamo.variables.higher_order_ops", "speculate_branch", {"branch"})
# the cond's schema (made when Dynamo runs the cond node on fake values): both arms again
_SCHEMA = ("torch._higher_order_ops.cond", "gen_schema", {"pred", "then_gm", "else_gm"})
# functionalization's alias and mutation check (AOTAutograd, AOTInductor): each arm alone,
# named "cond_true" / "cond_false", called from cond_func, whose frame holds the predicate
_ALIAS = ("torch._higher_order_ops.utils", "_check_alias_and_mutation", {"graph_module", "name"})
_ALIAS_SIDES = {"cond_true": True, "cond_false": False}


def _files() -> tuple[str, str, str] | None:
    """The files of torch's cond tracers (cond, Dynamo's, the alias check's; the last ""
    where this torch has no such check), if they keep the names this module reads."""
    import torch._dynamo.variables.higher_order_ops as dynamo_hops
    import torch._higher_order_ops.cond  # noqa: F401 - the module holding trace_cond
    import torch._higher_order_ops.utils as hop_utils

    make_fx = getattr(sys.modules[_MAKE_FX[0]], _MAKE_FX[1], None)
    fake = getattr(sys.modules[_FAKE[0]], _FAKE[1], None)
    schema = getattr(getattr(sys.modules[_SCHEMA[0]], "CondOp", None), _SCHEMA[1], None)
    if any(fn is None or not names <= set(fn.__code__.co_varnames) or
           fn.__code__.co_filename != make_fx.__code__.co_filename
           for fn, names in ((make_fx, _MAKE_FX[2]), (fake, _FAKE[2]),
                             (schema, _SCHEMA[2]))):
        return None
    dynamo_source = open(dynamo_hops.__file__).read()
    if f"def {_DYNAMO[1]}(" not in dynamo_source or "branch: bool" not in dynamo_source:
        return None
    alias = getattr(hop_utils, _ALIAS[1], None)
    alias_file = alias.__code__.co_filename if alias is not None and _ALIAS[2] <= set(
        alias.__code__.co_varnames) else ""
    return make_fx.__code__.co_filename, dynamo_hops.__file__, alias_file


def available() -> bool:
    """Whether this torch's cond tracing has the shape this workaround reads."""
    if _FILES[0] is None:
        _FILES[0] = _files() or ("", "", "")
    return bool(_FILES[0][0])


def symbolic_predicate(pred, frame) -> sympy.Basic | None:
    """What a cond's predicate is, symbolically (None: data, not known)."""
    value = getattr(pred, "sym_num", pred)  # Dynamo holds a SymBool in a SymNodeVariable
    if isinstance(value, torch.SymBool):
        return unless_constant(value.node.expr)
    if isinstance(value, torch.Tensor):  # make_fx: the fake tensor, and its node
        value = _unwrapped(value)  # functionalization (AOTAutograd) wraps it
        known = known_truth(value)
        if known is not None:
            return known
        return remember_truth(value, truth_of_node(_node_of(value, frame)))
    as_proxy = getattr(pred, "as_proxy", None)  # Dynamo: a TensorVariable, and its node
    if as_proxy is None:
        return None
    try:
        node = as_proxy().node
        return remember_truth(node.meta.get("example_value"), truth_of_node(node))
    except Exception:  # noqa: BLE001 - a variable with no single proxy: not known
        return None


def _unwrapped(value: torch.Tensor) -> torch.Tensor:
    """The tensor a functional tensor wraps: AOTAutograd's functionalization hands cond a
    wrapped predicate (``cond_func`` -> ``gen_schema``), whose node is its inner tensor's."""
    from torch._subclasses.functional_tensor import FunctionalTensor

    if isinstance(value, FunctionalTensor):
        value = value.elem
    if torch._is_functional_tensor(value):
        value = torch._from_functional_tensor(value)
    return value


def _node_of(value: torch.Tensor, frame):
    """The graph node a cond's predicate tensor came from: through the frame's make_fx
    ``proxy_mode`` (trace_cond); else through the nearest make_fx tracer up the stack that
    knows it (gen_schema under functionalization, with the proxy mode off its stack); else,
    where an FX interpreter runs the cond node (AOTAutograd's metadata pass, no tracer),
    that node's predicate argument."""
    from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode, PythonKeyTracer

    mode = frame.f_locals.get("proxy_mode")
    if mode is not None:
        return getattr(mode.tracer.unwrap_proxy(value), "node", None)
    up = frame.f_back
    while up is not None:
        running = up.f_locals.get("n") if up.f_code.co_name == "run_node" else None
        if isinstance(running, torch.fx.Node) and running.target is torch.ops.higher_order.cond:
            return running.args[0]
        for local in up.f_locals.values():
            tracer = local.tracer if isinstance(local, ProxyTorchDispatchMode) else local
            if isinstance(tracer, PythonKeyTracer):
                proxy = tracer.unwrap_proxy(value)
                if proxy is not value:
                    return getattr(proxy, "node", None)
        up = up.f_back
    return None


def as_arm(fn, pred, side: bool, *args):
    """``fn(*args)`` run as the ``side`` arm of a cond on ``pred`` outside torch.cond (for
    its outputs' metadata): a guard in it is decided by the arm's condition and facts, as
    when torch.cond traces the arm, not made a check on the whole program."""
    return fn(*args)


def _arm(frame) -> tuple[bool, sympy.Basic | None] | None:
    """(this frame traces an arm, the condition under which it runs) for a cond tracer's
    frame; None for any other frame."""
    code = frame.f_code
    if code is as_arm.__code__:
        names = frame.f_locals
        expr = symbolic_predicate(names.get("pred"), frame)
        return True, (expr if names.get("side") or expr is None else sympy.Not(expr))
    if code.co_name == _MAKE_FX[1] and code.co_filename == _FILES[0][0]:
        names = frame.f_locals
        if "false_graph" in names:  # both arms traced: merging their outputs
            return None
        expr = symbolic_predicate(names.get("pred"), frame)
        return True, (sympy.Not(expr) if expr is not None and "true_graph" in names else expr)
    if code.co_name == _FAKE[1] and code.co_filename == _FILES[0][0]:
        names = frame.f_locals  # the cond run on fake tensors: both arms, then a merge
        if "flat_false_outs" in names:
            return None
        expr = symbolic_predicate(names.get("pred"), frame)
        return True, (sympy.Not(expr) if expr is not None and "flat_true_outs" in names
                      else expr)
    if code.co_name == _SCHEMA[1] and code.co_filename == _FILES[0][0]:
        names = frame.f_locals
        if "else_gm" in names:
            return None
        expr = symbolic_predicate(names.get("pred"), frame)
        return True, (sympy.Not(expr) if expr is not None and "then_gm" in names else expr)
    if code.co_name == _ALIAS[1] and code.co_filename == _FILES[0][2]:
        side = _ALIAS_SIDES.get(frame.f_locals.get("name"))
        outer = frame.f_back
        if side is None or outer is None:  # another op's check (a while_loop's body)
            return None
        names = outer.f_locals
        expr = symbolic_predicate(names.get("unwrapped_pred", names.get("pred")), outer)
        return True, (expr if side or expr is None else sympy.Not(expr))
    if code.co_name == _DYNAMO[1] and code.co_filename == _FILES[0][1]:
        branch = frame.f_locals.get("branch")
        if not isinstance(branch, bool):  # another op's speculate_branch (switch)
            return None
        outer = frame.f_back
        expr = symbolic_predicate(outer.f_locals.get("pred"), outer) if outer is not None else None
        return True, (expr if branch or expr is None else sympy.Not(expr))
    return None


def arm_conditions(frame, facts: bool = False) -> list:
    """For each cond arm being traced at ``frame`` (innermost first): the sympy condition
    under which that arm runs, or None where the predicate is a tensor; with ``facts``, also
    what was stated to hold in those arms (``state_arm_fact``)."""
    out = []
    while frame is not None:
        arm = _arm(frame)
        if arm is not None:
            out.append(arm[1])
            held = _FACTS.get(id(frame))
            if facts and held is not None and held[0] is frame:
                out.extend(held[1])
        frame = frame.f_back
    return out


_FACTS: dict[int, tuple] = {}  # id(arm tracer's frame) -> (that frame, facts stated there)


def state_arm_fact(truth, side: bool = True) -> None:
    """``truth`` (a SymBool) holds in the cond arm being traced (``side``: or its negation):
    it decides guards in that arm, and nowhere else. Nothing is asserted: the ShapeEnv is
    not told, so the fact cannot reach the rest of the graph."""
    expr = unless_constant(truth.node.expr) if isinstance(truth, torch.SymBool) else None
    if expr is None or not _PATCH.depth:
        return
    frame = sys._getframe(1)
    while frame is not None and _arm(frame) is None:
        frame = frame.f_back
    if frame is not None:
        _FACTS.setdefault(id(frame), (frame, []))[1].append(expr if side else sympy.Not(expr))


_FILES = [None]
_ORIGINAL = ShapeEnv.guard_or_defer_runtime_assert
_PATCH = Reentrant(on_last_exit=_FACTS.clear)


def own_conditions(self, conditions: list) -> list:
    """The conditions this ShapeEnv can reason about: every symbol in them is its own (a
    predicate noted under another ShapeEnv, Dynamo's while torch.export traces, is not)."""
    return [c for c in conditions
            if c is not None and c.free_symbols <= self.var_to_range.keys()]


def _branch_local(self, orig_expr, msg, fx_node=None):
    conditions = own_conditions(self, arm_conditions(sys._getframe(1)))
    symbols = getattr(orig_expr, "free_symbols", set())
    # an assertion on none of the predicates' symbols stays as torch places it: on the arm's
    # own symbols (a size read in the arm, a fact the arm states: arm_facts.py) torch keeps
    # it inside the arm's graph, and the ShapeEnv refines ranges from it there
    if any(c.free_symbols & symbols for c in conditions):
        orig_expr = sympy.Or(*(sympy.Not(c) for c in conditions), _divisors_not_zero(
            self, orig_expr))
    return _ORIGINAL(self, orig_expr, msg, fx_node)


def _divisors_not_zero(self, expr: sympy.Basic) -> sympy.Basic:
    """``expr`` with each symbolic divisor ``d`` (never negative) read as ``Max(d, 1)``.
    The graph evaluates both sides of the ``Or`` an arm's assertion becomes, so the
    assertion of an arm that does not run must not divide by a size that is 0 there
    (``reshape(n, -1)`` asserts ``Mod(numel, n) == 0``; with ``n == 0`` the other arm runs).
    Where the arm runs with ``d == 0`` its assertion no longer stops it; its op does, with
    torch's own error (the reshape of a non-empty tensor to 0 rows)."""
    from torch.utils._sympy.functions import CleanDiv, FloorDiv, Mod, PythonMod

    def safe(node):
        numerator, divisor = node.args
        if divisor.is_number:
            return node
        try:
            never_negative = self.bound_sympy(divisor).lower >= 0
        except Exception:  # noqa: BLE001 - a divisor torch cannot bound: left as it is
            return node
        return node.func(numerator, sympy.Max(divisor, 1)) if never_negative else node

    return expr.replace(
        lambda n: isinstance(n, FloorDiv | Mod | PythonMod | CleanDiv) and len(n.args) == 2,
        safe)


def truth_of(node) -> tuple[sympy.Basic | None, ShapeEnv | None]:
    """A graph value's symbolic truth (a SymBool, or a 0-d tensor made from one) and the
    ShapeEnv its symbols belong to; (None, None) where it is data."""
    expr = truth_of_node(node)
    if expr is None:
        return None, None
    for sub in node.graph.nodes:
        value = sub.meta.get("val", sub.meta.get("example_value"))
        env = getattr(getattr(value, "node", None), "shape_env", None) or \
            getattr(getattr(value, "fake_mode", None), "shape_env", None)
        if env is not None and expr.free_symbols <= env.var_to_range.keys():
            return expr, env
    return None, None


def contradicts(env: ShapeEnv, conditions: list, expr: sympy.Basic) -> bool:
    """Whether ``conditions`` (an arm's, and the arms' around it) make ``expr`` false: a
    cond side guarded so can never run."""
    return decided_in_arm(env, expr, conditions) == sympy.false


_ORIGINAL_EVALUATE = ShapeEnv.evaluate_expr


def _evaluate_in_arm(self, orig_expr, *args, **kwargs):
    count = len(self.guards)
    try:
        decided = _decided_by_arm(self, orig_expr)
        if decided is not None:  # the arm's own condition decides it: no guard on inputs
            return decided
        return _ORIGINAL_EVALUATE(self, orig_expr, *args, **kwargs)
    except GuardOnDataDependentSymNode:
        conditions = own_conditions(self, arm_conditions(sys._getframe(1), facts=True))
        decided = decided_in_arm(self, orig_expr, conditions) if conditions else None
        if decided is None:
            raise
        return decided
    finally:  # this frame hides the user's line from torch's own record of the guard
        if len(self.guards) > count:
            note_guard_lines(self, count, sys._getframe(1))


def _decided_by_arm(env: ShapeEnv, expr) -> sympy.Basic | None:
    """A test on sizes with a hint (a dynamic input dimension) that the condition of the
    cond arm being traced decides (``x[:4]`` in the arm of ``if x.shape[0] > 4``): true or
    false there, without the guard torch would put on the program's inputs; None where no
    arm is traced, or its condition says nothing about ``expr``. Cheap first: only a test
    that is neither a constant nor already decided by the symbols' ranges gets here."""
    symbols = getattr(expr, "free_symbols", None)
    backed = env.__dict__.get("backed_var_to_val")
    if backed is None:  # an older torch
        backed = env.__dict__.get("var_to_val", {})
    if not symbols or not symbols <= backed.keys():
        return None
    try:
        if env._maybe_evaluate_static(expr) is not None:
            return None
    except Exception:  # noqa: BLE001 - another torch: torch evaluates it as before
        return None
    conditions = own_conditions(env, arm_conditions(sys._getframe(2), facts=True))
    if not conditions:
        return None
    return decided_in_arm(env, expr, conditions)


@contextlib.contextmanager
def branch_local_asserts() -> Iterator[None]:
    """Condition cond-arm assertions on their arm while the body runs (re-entrant); a
    no-op where this torch's ``trace_cond`` does not have the expected shape."""
    if not available():
        yield
        return
    with _PATCH.active((ShapeEnv, "guard_or_defer_runtime_assert", _branch_local),
                       (ShapeEnv, "evaluate_expr", _evaluate_in_arm)):
        yield
