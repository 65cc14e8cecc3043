"""The model a Triton Python backend runs for a repository written by ``write_repository``.

The generated ``model.py`` subclasses ``StitchedTritonModel`` and hands it Triton's
``triton_python_backend_utils``. Each request runs alone (graph, then its epilogue, with the
request id on every log record) and gets its own response: a bad request or a failed model
check answers that request with an error and the model keeps serving.
"""

from __future__ import annotations

import json
import logging
import os

import numpy as np

from . import logs
from .runner import RequestRunner
from .spec import ServeSpec

log = logging.getLogger("stitch.serve")


class StitchedTritonModel:
    utils = None  # triton_python_backend_utils, set by the generated model.py

    def initialize(self, args: dict) -> None:
        from ..deploy import load

        logs.install(os.environ.get("STITCH_SERVE_LOG_LEVEL", "INFO"))
        config = json.loads(args["model_config"])
        path = os.path.join(args["model_repository"], args["model_version"], "model.pt2")
        program = load(path)  # checked before compiled code is loaded
        spec = ServeSpec.from_manifest(program.manifest,
                                       max_batch_size=config.get("max_batch_size") or None,
                                       epilogue_calls=len(program.epilogue))
        self.runner = RequestRunner(program, spec)
        import torch

        from .variant import choose_variant

        variant = choose_variant(program.manifest, torch.cuda.is_available())
        log.info("model %s: %s; variant %s (%s); batching: %s", config.get("name"), path,
                 variant.name, variant.reason, spec.batching.reason)

    def execute(self, requests):
        pb = self.utils
        responses = []
        for request in requests:
            rid = request.request_id() or _parameter(request, "request_id") or \
                self.runner.next_id()
            try:
                arrays = {s.name: pb.get_input_tensor_by_name(request, s.name).as_numpy()
                          for s in self.runner.spec.inputs}
                out = self.runner(arrays, rid)
                responses.append(pb.InferenceResponse(
                    output_tensors=[pb.Tensor(name, np.array(value, copy=True, order="C"))
                                    for name, value in out.items()]))
            except Exception as e:  # noqa: BLE001 - answer this request, keep serving
                log.warning("request %s failed: %s: %s", rid, type(e).__name__, e)
                responses.append(pb.InferenceResponse(
                    error=pb.TritonError(f"[request {rid}] {type(e).__name__}: {e}")))
        return responses

    def finalize(self) -> None:
        log.info("model unloaded")


def _parameter(request, name: str) -> str | None:
    try:
        value = json.loads(request.parameters() or "{}").get(name)
    except (ValueError, AttributeError):
        return None
    return None if value is None else str(value)
