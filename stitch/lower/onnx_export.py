"""The stitched graph as ONNX: ``torch.onnx.export(exported_program, dynamo=True)``.

``torch.cond`` becomes ONNX ``If`` and ``torch.while_loop`` becomes ``Loop``. Two things the
exporter drops are handled here, never silently:

- in-graph checks (``aten._assert_async``: asserts, raises, guards) have no ONNX operator
  and vanish. Top-level checks are lifted: each condition becomes an extra graph output,
  and the runner raises the check's message when one is false (the program then re-raises
  the model's exception). A check inside a cond/while body cannot be lifted: refused.
- buffer updates (``copy_`` into a buffer) are dropped (buffers become initializers, state
  never advances): they are carried as state instead (``onnx_state``).

    before:  _assert_async(lt, "[stitch:S1:AssertionError:...]"); return (out,)
    after:   return (out, all(lt))     # OnnxGraph.checks == ("[stitch:S1:...]",)
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import time
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    OutputKind,
    OutputSpec,
    TensorArgument,
)

from capture import torch_messages as tm
from capture.tracing_fixes import tracing_fixes

from .built import BackendUnavailable
from .onnx_checks import pending_checks
from .onnx_state import expose_state, lift_buffer_updates

CONTROL = (torch.ops.higher_order.cond, torch.ops.higher_order.while_loop)


class OnnxRefused(BackendUnavailable):
    """The stitched graph cannot be run faithfully as ONNX (what is lost, and what instead)."""


@dataclass(frozen=True)
class OnnxGraph:
    """What the ONNX route runs and saves: the model plus how to call it like the program."""

    model: bytes  # a serialized onnx.ModelProto
    feeds: tuple[tuple[int, str], ...]  # (index among the flat user inputs, ONNX input name)
    outputs: int  # flat leaves of the program's (outputs, extras)
    checks: tuple[str, ...]  # messages of the lifted checks: the last outputs
    in_spec: str  # pytree treespec_dumps of (args, kwargs)
    out_spec: str  # pytree treespec_dumps of (outputs, extras)
    export_seconds: float = 0.0
    # updated buffers (onnx_state): input names, whose new values are the outputs between
    # the program's and the checks'; their initial values are initializers in ``model``
    state: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"feeds": [list(f) for f in self.feeds], "outputs": self.outputs,
                "checks": list(self.checks), "in_spec": self.in_spec, "out_spec": self.out_spec,
                "state": list(self.state)}

    @staticmethod
    def from_json(model: bytes, data: dict) -> OnnxGraph:
        return OnnxGraph(model, tuple((int(i), str(n)) for i, n in data["feeds"]),
                         int(data["outputs"]), tuple(data["checks"]), data["in_spec"],
                         data["out_spec"], state=tuple(data.get("state", ())))


def _require_onnx() -> None:
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as e:
        raise BackendUnavailable(f"the ONNX route needs onnx and onnxscript ({e}); pip install "
                                 "'torch-stitch[onnx]'") from None


REDUCTIONS = (torch.ops.aten.amax.default, torch.ops.aten.amin.default)


def fill_reduction_dims(gm: torch.fx.GraphModule) -> int:
    """``amax(x)``/``amin(x)`` with no ``dim`` (all dims) become ``amax(x, [0, .., n-1])``:
    the exporter's ONNX function requires ``dim`` (seen on torch 2.14 / onnxscript 0.7.2).
    Returns how many were rewritten."""
    count = 0
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        changed = False
        for node in module.graph.nodes:
            if node.op == "call_function" and node.target in REDUCTIONS and len(node.args) == 1 \
                    and "dim" not in node.kwargs and "val" in node.args[0].meta:
                node.args = (node.args[0], list(range(node.args[0].meta["val"].dim())))
                changed, count = True, count + 1
        if changed:
            module.recompile()
    return count


def lift_checks(ep: torch.export.ExportedProgram) -> tuple[torch.export.ExportedProgram,
                                                            tuple[str, ...], list]:
    """A copy of ``ep`` whose updated buffers are state (``onnx_state``: inputs, new values
    as outputs after the program's) and whose top-level checks are extra outputs after
    those; reductions over all dims spelled out. Returns it, the checks' messages and the
    state [(input name, buffer target)], both in output order."""
    gm = copy.deepcopy(ep.graph_module)
    fill_reduction_dims(gm)
    updates = lift_buffer_updates(gm, ep.graph_signature)
    conditions = pending_checks(gm)  # at any depth of cond branches (onnx_checks)
    output = next(n for n in gm.graph.nodes if n.op == "output")
    output.args = ((*output.args[0], *(new for _, _, new in updates),
                    *(f for f, _ in conditions)),)
    # one flat tuple of outputs: ONNX returns leaves; the runner unflattens with the
    # program's own out_spec
    flat = pytree.tree_structure(tuple(range(len(output.args[0]) - _mutations(ep))))
    codegen = gm.graph._codegen
    if getattr(codegen, "pytree_info", None) is not None:
        codegen.pytree_info = codegen.pytree_info._replace(out_spec=flat)
    gm.recompile()
    sig = ep.graph_signature
    specs = [*sig.output_specs,
             *(OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(n.name), None)
               for n in [*(new for _, _, new in updates), *(f for f, _ in conditions)])]
    calls = copy.deepcopy(ep.module_call_graph)
    for entry in calls:
        if entry.fqn == "" and entry.signature is not None:
            entry.signature.out_spec = flat
    lifted = torch.export.ExportedProgram(
        root=gm, graph=gm.graph,
        graph_signature=ExportGraphSignature(_named_as_placeholders(sig.input_specs, gm),
                                             specs),
        state_dict=ep.state_dict, range_constraints=ep.range_constraints,
        module_call_graph=calls, constants=ep.constants, verifiers=[ep.verifier])
    return lifted, tuple(m for _, m in conditions), [t for _, t, _ in updates]


def _named_as_placeholders(input_specs, gm: torch.fx.GraphModule) -> list:
    """The input specs with the names the copied graph gives its placeholders: a copy
    renames one that shadows a builtin (``nn.Sequential``'s ``input`` becomes ``input_1``)
    and the program's verifier then refuses the spec's old name."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(input_specs):
        return list(input_specs)
    out = []
    for spec, node in zip(input_specs, placeholders, strict=True):
        arg = spec.arg
        if hasattr(arg, "name") and not isinstance(arg, ConstantArgument) \
                and arg.name != node.name:
            spec = dataclasses.replace(spec, arg=dataclasses.replace(arg, name=node.name))
        out.append(spec)
    return out


def _mutations(ep: torch.export.ExportedProgram) -> int:
    return sum(s.kind != OutputKind.USER_OUTPUT for s in ep.graph_signature.output_specs)


def refusals(ep: torch.export.ExportedProgram) -> list[str]:
    """Why this graph cannot be run faithfully as ONNX (empty when it can). Buffer updates
    by ``copy_`` are carried as state (``onnx_state``); other writes are refused there."""
    why = []
    if _mutations(ep):
        why.append("the graph's signature lists buffer mutations (a functional graph); "
                   "only copy_ updates are carried as ONNX state")
    return why


@contextlib.contextmanager
def _quiet_loggers(names=("onnxscript", "onnx_ir", "torch.onnx")):
    """The exporter's passes log each step at INFO: not the user's business (a demo or a
    server with INFO logging would show dozens of lines per export)."""
    import logging

    loggers = [logging.getLogger(n) for n in names]
    old = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for lg, level in zip(loggers, old, strict=True):
            lg.setLevel(level)


def exporter_reason(error: BaseException) -> str:
    """The root cause and the failing node from torch.onnx's long error text."""
    lines = [ln.strip() for ln in str(error).splitlines()]
    causes = [ln for ln in lines if tm.matches(tm.ONNX_CAUSE_LINE, ln)]
    if not causes:
        return f"{type(error).__name__}: {(lines or [''])[0][:300]}"
    root, node = causes[0][:300], causes[-1]
    found = tm.search(tm.ONNX_TRANSLATING, node)
    where = node[found.start():][:200] if found is not None else ""
    return root + (f" ({where})" if where else "")


def to_onnx(program) -> OnnxGraph:
    """Export ``program``'s graph to ONNX (checks lifted); OnnxRefused saying why not.
    Exported once per program: exporting the same graph again can fail (the exporter's
    decomposition leaves unbacked symbols pending in the graph's shape environment; seen on
    Longformer), and it costs seconds."""
    cached = getattr(program, "_stitch_onnx_graph", None)
    if cached is not None:
        return cached
    with tracing_fixes():  # the exporter's decompositions trace the arms again
        graph = _to_onnx(program)
    program._stitch_onnx_graph = graph
    return graph


def _to_onnx(program) -> OnnxGraph:
    _require_onnx()
    ep = program.exported_program
    why = refusals(ep)
    if why:
        raise OnnxRefused("; ".join(why) + ". The graph runs with the other backends "
                          "(eager, inductor, aoti).")
    lifted, checks, state = lift_checks(ep)
    start = time.perf_counter()
    sink = io.StringIO()  # the optimizer prints a line per shared initializer
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), _quiet_loggers():
        try:
            # with state, no exporter optimizer: it may fold a buffer's value into constants,
            # and the buffer must stay an input the runner feeds
            onnx_program = torch.onnx.export(lifted, (), dynamo=True, verbose=False,
                                             report=False, optimize=not state)
        except Exception as e:  # noqa: BLE001 - the exporter's own errors, said plainly
            raise OnnxRefused(f"torch.onnx.export failed: {exporter_reason(e)}") from e
    model = onnx_program.model_proto.SerializeToString()
    if state:
        model = expose_state(model, state)
    seconds = time.perf_counter() - start
    user = [s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    import onnx

    names = {i.name for i in onnx.load_from_string(model).graph.input}
    # onnx_ir renames an input the graph also returns as it is to "<name>_orig" (the output
    # keeps the name, through an Identity: output_fix._alias_direct_outputs)
    fed = {n: n if n in names else f"{n}_orig" for n in user}
    feeds = tuple((i, fed[n]) for i, n in enumerate(user) if fed[n] in names)
    missing = names - {n for _, n in feeds} - set(state)
    if missing:
        raise OnnxRefused(f"the ONNX graph has inputs {sorted(missing)} that are not the "
                          f"program's user inputs ({user}); cannot feed them")
    return OnnxGraph(model, feeds, ep.call_spec.out_spec.num_leaves, checks,
                     pytree.treespec_dumps(ep.call_spec.in_spec),
                     pytree.treespec_dumps(ep.call_spec.out_spec), seconds,
                     tuple(state))
