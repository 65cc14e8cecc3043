"""``StitchedProgram``: one ExportedProgram plus the side-effect epilogue."""

from __future__ import annotations

import copy
import json
from typing import Any

import torch
from torch.export.graph_signature import OutputKind

from .call_inputs import ConstantInputs
from .deploy.compile import save_program
from .epilogue import Epilogue, ListTargets
from .errors import StitchError
from .running import original_exception, run_with_epilogue
from .synthesize.convert.functions import installed

__all__ = ["PartialProgram", "StitchedProgram", "original_exception", "run_with_epilogue"]


class StitchedProgram:
    """Callable like the model: runs the graph, then replays the epilogue."""

    def __init__(self, exported_program: torch.export.ExportedProgram, epilogue: Epilogue,
                 report: Any = None, examples: list | None = None,
                 dynamic_shapes: Any = None, defaults: dict | None = None) -> None:
        self.exported_program = exported_program
        self.epilogue = epilogue
        self.report = report
        self.examples = list(examples or [])
        self.dynamic_shapes = dynamic_shapes
        # ExportedProgram.module() shares buffers with the program's state_dict: calling it
        # would change what compile/save later build from. Keep the ExportedProgram pristine:
        # a copy, sharing only the parameters the graph never writes (copying the weights
        # would cost as much memory again as the model)
        self._module = _module_copy(exported_program)
        self._constants = ConstantInputs(exported_program, defaults)
        # where deferred appends go: stitch.export binds the model it was given
        self.targets = ListTargets()
        # the model it was exported from (stitch.export sets it; never saved): stitch.compile
        # times a copy of it against the graphs (never slower than the eager model)
        self.model: torch.nn.Module | None = None

    @property
    def example(self):
        if not self.examples:
            raise ValueError("this program was built without example inputs")
        return self.examples[0]

    def save(self, path: str, format: str | None = None) -> str:
        """Write the deployment artifact: ``.pt2`` (AOTInductor package + epilogue +
        manifest) or, for a path ending in ``.onnx`` or ``format="onnx"``, the ONNX graph
        with the same JSON in its metadata (``stitch.deploy``)."""
        return save_program(self, path, format)

    def module(self) -> torch.nn.Module:
        """Like ``ExportedProgram.module()``: the graph alone (returns ``(outputs, extras)``;
        an output whose structure follows the data is a ``stitch.Alternatives``, which
        ``stitch.resolve`` turns into the side the graph took)."""
        return self.exported_program.module()

    def __call__(self, *args, **kwargs):
        kwargs = self._constants.with_defaults(kwargs)
        args = self._constants.completed(args, kwargs)
        self._constants.check(args, kwargs)
        return run_with_epilogue(self._module, self.epilogue, args, kwargs,
                                 lists=self.targets)

    @property
    def graph_module(self) -> torch.fx.GraphModule:
        return self.exported_program.graph_module

    def to_json(self) -> dict:
        return {"epilogue": self.epilogue.to_json(),
                "report": self.report.to_json() if self.report is not None else None}

    def __repr__(self) -> str:
        n = len(self.epilogue)
        return f"StitchedProgram(1 graph, {n} deferred call{'s' * (n != 1)})"

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)


class PartialProgram:
    """What ``stitch.export(..., allow_partial=True)`` returns when breaks remain: the model
    with every rewrite stitch could make, under ``torch.compile``. It runs the fewest graphs
    stitch reached (``report.graphs_after``); ``report.remaining`` says which breaks are left
    and why. Not an ExportedProgram: it cannot be saved as an artifact.

    The rewritten functions are installed only for the duration of each call (one call at a
    time), so the user's classes are untouched between calls.
    """

    def __init__(self, model, rewrites, report=None) -> None:
        import threading

        import torch

        self._model = model
        self._rewrites = rewrites
        self._compiled = torch.compile(model)
        self._lock = threading.Lock()
        self.report = report
        self.exported_program = None

    def __call__(self, *args, **kwargs):
        with self._lock, installed(self._rewrites):
            return self._compiled(*args, **kwargs)

    def save(self, path: str):
        raise StitchError("a partial program (allow_partial=True with breaks left) is not one "
                          "graph and cannot be saved as an artifact; see report.remaining")

    def __repr__(self) -> str:
        n = self.report.graphs_after if self.report is not None else "?"
        return f"PartialProgram({n} graphs under torch.compile)"


def _module_copy(ep: torch.export.ExportedProgram) -> torch.nn.Module:
    """``ep.module()`` copied, its parameters shared unless the graph writes them."""
    module = ep.module()
    written = {s.target for s in ep.graph_signature.output_specs
               if s.kind == OutputKind.PARAMETER_MUTATION}
    params = list(module.named_parameters(remove_duplicate=False))
    written_ids = {id(p) for name, p in params if name in written}  # a tied weight: by object
    memo = {id(p): p for _, p in params if id(p) not in written_ids}
    return copy.deepcopy(module, memo)
