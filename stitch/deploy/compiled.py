"""``CompiledProgram``: what ``stitch.compile`` returns."""

from __future__ import annotations

import torch

from ..call_inputs import structure_problem
from ..number_inputs import graph_inputs
from ..running import run_with_epilogue
from .save import save_compiled


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
        # the call's checks, where the program has any: at microsecond latencies (kornia's
        # colour ops, 5 us) each no-op check was a measurable share of the call
        constants = getattr(program, "_constants", None)
        self._constants = constants if constants is not None and (
            constants.constants or constants.defaults) else None
        # the model itself deployed: called on the call's inputs as they are. The checks and
        # conversions are the graph's (a None the graph holds, numbers it takes as tensors);
        # the model takes whatever it takes, and each costs microseconds a call
        self._direct = (built.as_called or built.run) if self.backend == "model" else None

    def __call__(self, *args, **kwargs):
        # no_grad is entered only when grad is on: at microsecond latencies its enter/exit
        # alone (~2 us measured) made the deployed eager model slower than the model itself
        if torch.is_grad_enabled():
            with torch.no_grad():
                return self.__call__(*args, **kwargs)
        if self._direct is not None:
            return self._direct(*args, **kwargs)
        return self._run(args, kwargs)

    def _run(self, args, kwargs):
        constants = self._constants
        if constants is not None:  # a tensor where the graph holds None: refused, not ignored
            kwargs = constants.with_defaults(kwargs)
            args = constants.completed(args, kwargs)
            constants.check(args, kwargs)
        # numbers the graph takes as 0-d tensors: so for every backend and for what a failed
        # call is checked against
        args, kwargs = graph_inputs(self.program.epilogue.number_inputs, args, kwargs)
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
        return save_compiled(self, path, format)

    def __repr__(self) -> str:
        return f"CompiledProgram(backend={self.backend!r})"
