"""``CompiledProgram`` (what ``stitch.compile`` returns) and ``LoadedProgram`` (``stitch.load``)."""

from __future__ import annotations

import json
import threading

import torch

from ..call_inputs import SignatureConstants, structure_problem
from ..epilogue import ListTargets
from ..running import run_with_epilogue


class CompiledProgram:
    """The stitched graph lowered to a backend, plus the epilogue; callable like the model.

    A deployment: it runs without autograd, as every candidate was built, checked and timed
    (a grad-mode call would otherwise recompile the Inductor build on the first request).
    For gradients, call the ``StitchedProgram``."""

    def __init__(self, program, built, decision) -> None:
        self.program = program
        self.backend = built.backend
        self.decision = decision
        self._built = built

    def __call__(self, *args, **kwargs):
        # no_grad is entered only when grad is on: at microsecond latencies its enter/exit
        # alone (~2 us measured) made the deployed eager model slower than the model itself
        if torch.is_grad_enabled():
            with torch.no_grad():
                return self._run(args, kwargs)
        return self._run(args, kwargs)

    def _run(self, args, kwargs):
        constants = getattr(self.program, "_constants", None)
        if constants is not None:  # a tensor where the graph holds None: refused, not ignored
            args = constants.completed(args, kwargs)
            constants.check(args, kwargs)
        if self.backend == "model":  # it beat every graph: it prints/logs for itself
            return self._built.run(*args, **kwargs)
        try:
            return run_with_epilogue(self._built.run, self.program.epilogue, args, kwargs,
                                     lists=self.program.targets)
        except Exception as e:
            # a backend answers a malformed call with its internals (Dynamo's "Attempt to
            # trace generator"): said in the program's terms, checked only on failure
            problem = structure_problem(self.program.exported_program, args, kwargs)
            if problem is not None:
                raise TypeError(problem) from e
            raise

    def save(self, path: str, format: str | None = None) -> str:
        """Write the artifact: ``format="pt2"`` (AOTInductor package, the default) or
        ``"onnx"`` (the default for a path ending in ``.onnx``); see ``stitch.deploy.save``."""
        from .save import save_compiled

        return save_compiled(self, path, format)

    def __repr__(self) -> str:
        return f"CompiledProgram(backend={self.backend!r})"


class LoadedProgram:
    """An artifact loaded back: runs its graph (AOTInductor, or ONNX Runtime for a ``.onnx``),
    then the epilogue."""

    def __init__(self, runner, epilogue, manifest: dict, path: str) -> None:
        self._runner = runner
        self.epilogue = epilogue
        self.manifest = manifest
        self.path = path
        self._lock = threading.Lock()
        # deferred appends and rebindings: kept in targets.lists and targets.values, or
        # targets.bind(model) to send them there
        self.targets = ListTargets()
        # a tensor or another value where the graph holds a constant input: refused
        self._constants = SignatureConstants(manifest.get("signature"))

    @property
    def deployment(self) -> dict | None:
        return self.manifest.get("deployment")

    def __call__(self, *args, **kwargs):
        # the AOTInductor runner keeps per-model state (and mutable buffers): one call at a
        # time through it; the epilogue replays outside the lock
        self._constants.check(args, kwargs)
        return run_with_epilogue(self._locked, self.epilogue, args, kwargs,
                                 lists=self.targets)

    def call(self, args, kwargs=None, *, printer=None):
        """Like calling it; ``printer(text, stream)`` receives the epilogue's prints."""
        self._constants.check(args, kwargs or {})
        return run_with_epilogue(self._locked, self.epilogue, args, kwargs or {}, printer,
                                 self.targets)

    def _locked(self, *args, **kwargs):
        with self._lock:
            return self._runner(*args, **kwargs)

    def describe(self) -> str:
        return json.dumps({k: v for k, v in self.manifest.items() if k != "entries"}, indent=2)
