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
        path = _artifact(args)
        program = load(path)  # checked before compiled code is loaded
        spec = ServeSpec.from_manifest(program.manifest,
                                       max_batch_size=config.get("max_batch_size") or None,
                                       epilogue_calls=len(program.epilogue))
        self.runner = RequestRunner(program, spec)
        import torch

        from .variant import choose_variant

        if program.manifest.get("container") == "onnx":
            from .variant import Variant

            variant = Variant("onnxruntime-cpu", "cpu", "an ONNX artifact: ONNX Runtime (CPU) "
                              "runs it in this Python backend; GPU servers can use the stock "
                              "<model>_pipeline (onnxruntime_onnx + TensorRT) instead")
        else:
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


def _artifact(args: dict) -> str:
    folder = os.path.join(args["model_repository"], args["model_version"])
    onnx = os.path.join(folder, "model.onnx")
    return onnx if os.path.exists(onnx) else os.path.join(folder, "model.pt2")


class EpilogueTritonModel:
    """The epilogue step of the stock ONNX pipeline (``stitch.serve.triton_onnx``): receives
    every output of Triton's ONNX Runtime model, raises a failed lifted check as the model's
    exception, replays the epilogue (log records carry the request id) and answers with the
    user's outputs."""

    utils = None

    def initialize(self, args: dict) -> None:
        import onnx
        import torch.utils._pytree as pytree

        from ..deploy.onnx_artifact import read_onnx

        logs.install(os.environ.get("STITCH_SERVE_LOG_LEVEL", "INFO"))
        manifest, self.epilogue, self.graph = read_onnx(_artifact(args))
        self.names = [o.name for o in onnx.load_from_string(self.graph.model).graph.output]
        self.out_spec = pytree.treespec_loads(self.graph.out_spec)
        self.spec = ServeSpec.from_manifest(manifest, epilogue_calls=len(self.epilogue))
        self.count = 0

    def execute(self, requests):
        import torch
        import torch.utils._pytree as pytree

        from ..epilogue import replay
        from ..running import original_exception

        pb = self.utils
        responses = []
        for request in requests:
            self.count += 1
            rid = request.request_id() or _parameter(request, "request_id") or \
                f"srv-{self.count}"
            try:
                flat = [torch.from_numpy(np.array(pb.get_input_tensor_by_name(request, n)
                                                  .as_numpy(), copy=True))
                        for n in self.names]
                outputs, conditions = flat[:self.graph.outputs], flat[self.graph.outputs:]
                for condition, message in zip(conditions, self.graph.checks, strict=True):
                    if not bool(condition.all()):
                        raise original_exception(RuntimeError(message),
                                                 self.epilogue.messages)
                out, extras = pytree.tree_unflatten(outputs, self.out_spec)
                with logs.request(rid):
                    replay(self.epilogue, extras, logs.log_print, None)
                responses.append(pb.InferenceResponse(output_tensors=[
                    pb.Tensor(name, np.array(value, copy=True, order="C"))
                    for name, value in self.spec.unbind(out).items()]))
            except Exception as e:  # noqa: BLE001 - answer this request, keep serving
                log.warning("request %s failed: %s: %s", rid, type(e).__name__, e)
                responses.append(pb.InferenceResponse(
                    error=pb.TritonError(f"[request {rid}] {type(e).__name__}: {e}")))
        return responses


def _parameter(request, name: str) -> str | None:
    try:
        value = json.loads(request.parameters() or "{}").get(name)
    except (ValueError, AttributeError):
        return None
    return None if value is None else str(value)
