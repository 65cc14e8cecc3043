"""``stitch serve``: an artifact behind a real Triton Inference Server, through PyTriton.

PyTriton starts Triton (HTTP, gRPC, metrics) and forwards each request to a Python function
in this process; that function runs the artifact's graph and replays its epilogue here, per
request, with the request id on every log line. PyTriton pins numpy<2, so it lives in the
``serve`` extra and, in this repository, in its own venv (``make serve-env``).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import tempfile
from dataclasses import dataclass

import torch

from ..errors import ServeError
from . import environment, logs
from .runner import RequestRunner
from .spec import ServeSpec
from .variant import Variant, choose_variant, guards_line

log = logging.getLogger("stitch.serve")


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    max_batch_size: int | None = None
    model_name: str = "stitched"
    log_level: str = "INFO"
    engine: str = "pytriton"  # or "repository": bundled Triton + generated model repository


def prepare(path: str, options: ServeOptions) -> tuple[RequestRunner, Variant]:
    """Load and check the artifact, decide variant and batching (no server started)."""
    from ..deploy import load

    program = load(path)  # the artifact is checked before any compiled code is loaded
    spec = ServeSpec.from_manifest(program.manifest, max_batch_size=options.max_batch_size,
                                   epilogue_calls=len(program.epilogue))
    variant = choose_variant(program.manifest, torch.cuda.is_available())
    runner = RequestRunner(program, spec)
    runner.probe_row_independence()
    return runner, variant


def serve(path: str, options: ServeOptions = ServeOptions()) -> int:
    """Serve until SIGINT/SIGTERM; returns the exit code."""
    logs.install(options.log_level)
    if options.engine == "repository":
        from .stock import serve_repository

        return serve_repository(path, options)
    if options.engine != "pytriton":
        raise ServeError(f"unknown engine {options.engine!r}; expected pytriton or repository")
    try:
        from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
        from pytriton.triton import Triton, TritonConfig
    except ImportError as e:
        raise ServeError(f"stitch serve needs PyTriton ({e}): pip install 'torch-stitch[serve]' in "
                         "its own venv (PyTriton pins numpy<2); in this repository `make "
                         "serve-env` builds .venv-serve") from None
    runner, variant = prepare(path, options)
    spec = runner.spec
    env_line = "LD_LIBRARY_PATH left as it is (STITCH_SERVE_KEEP_LD_LIBRARY_PATH=1)" \
        if os.environ.get("STITCH_SERVE_KEEP_LD_LIBRARY_PATH") == "1" else environment.prepare()
    log.info("serving %s as model %r: variant %s (%s)", path, options.model_name, variant.name,
             variant.reason)
    log.info("%s", guards_line(runner.program.manifest))
    log.info("batching: %s", json.dumps(spec.batching.to_json()))
    log.info("inputs: %s; outputs: %s", ", ".join(s.describe() for s in spec.inputs),
             ", ".join(s.describe() for s in spec.outputs))
    log.info("%s", env_line)

    def tensors(specs):
        return [Tensor(name=s.name, dtype=s.numpy_dtype, shape=spec.triton_shape(s))
                for s in specs]

    def infer(requests):
        ids = [str((r.parameters or {}).get("request_id") or runner.next_id()) for r in requests]
        try:
            return runner.run_merged([dict(r.data) for r in requests], ids)
        except Exception as e:  # noqa: BLE001 - this request fails, the server goes on
            log.warning("request %s failed: %s: %s", "+".join(ids), type(e).__name__, e)
            raise RequestFailed(f"[request {'+'.join(ids)}] {type(e).__name__}: {e}") from None

    batching = spec.batching
    model_config = ModelConfig(
        batching=batching.max_batch_size > 0, max_batch_size=max(batching.max_batch_size, 1),
        batcher=DynamicBatcher() if batching.dynamic_batching else None)
    log_dir = tempfile.mkdtemp(prefix="stitch-serve-")
    triton_log = os.path.join(log_dir, "triton.log")
    config = TritonConfig(http_address=options.host, http_port=options.http_port,
                          grpc_address=options.host, grpc_port=options.grpc_port,
                          metrics_port=options.metrics_port, allow_metrics=True,
                          log_file=triton_log, log_verbose=0)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with Triton(config=config) as triton:
            triton.bind(model_name=options.model_name, infer_func=infer,
                        inputs=tensors(spec.inputs), outputs=tensors(spec.outputs),
                        config=model_config, strict=True)
            log.info("ready: http://%s:%d (gRPC %d, metrics %d); Triton's log: %s",
                     options.host, options.http_port, options.grpc_port,
                     options.metrics_port, triton_log)
            triton.serve()
    except KeyboardInterrupt:
        pass
    except Exception as e:
        text = _read(triton_log)
        explained = environment.explain_failure(text)
        if explained is not None:
            raise explained from e
        raise ServeError(f"the Triton server failed: {type(e).__name__}: {e}\n"
                         f"last lines of {triton_log}:\n{text[-2000:]}") from e
    log.info("stopped")
    return 0


class RequestFailed(RuntimeError):
    """What the client sees when its request failed: the request id, the error and why."""


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""
