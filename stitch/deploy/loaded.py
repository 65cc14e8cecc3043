"""``LoadedProgram``: what ``stitch.load`` returns for an artifact (``.pt2`` or ``.onnx``)."""

from __future__ import annotations

import json
import threading

from ..call_inputs import SignatureConstants
from ..epilogue import ListTargets
from ..running import run_with_epilogue


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
