"""``stitch serve --engine repository``: the Triton server binary that PyTriton bundles, run on
a generated model repository (no PyTriton proxy in the request path).

PyTriton forwards each request from Triton to this process over ZeroMQ; for small models that
hop costs a few milliseconds (see experiments/results/serve.md). Here Triton's own Python
backend runs the artifact in its stub process, so a request makes no extra hop.
"""

from __future__ import annotations

import os
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile

from ..errors import ServeError
from .environment import libpython
from .variant import guards_line


def bundled_triton() -> str:
    try:
        import pytriton
    except ImportError:
        raise ServeError("the repository engine runs the Triton server that PyTriton bundles: "
                         "pip install 'torch-stitch[serve]' (in its own venv: PyTriton pins "
                         "numpy<2); `make serve-env` builds .venv-serve") from None
    return os.path.join(os.path.dirname(pytriton.__file__), "tritonserver")


def backend_directory(workdir: str) -> str:
    """A backends/ folder laid out as a stock Triton install has it, with the Python stub
    built for this interpreter's version."""
    triton = bundled_triton()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = os.path.join(triton, "python_backend_stubs", version, "triton_python_backend_stub")
    if not os.path.exists(stub):
        raise ServeError(f"PyTriton ships no Python-backend stub for Python {version} "
                         f"(looked for {stub})")
    backends = os.path.join(workdir, "backends")
    python = os.path.join(backends, "python")
    os.makedirs(python, exist_ok=True)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        target = os.path.join(python, name)
        if not os.path.exists(target):
            os.symlink(os.path.join(triton, "backends", "python", name), target)
    shutil.copy(stub, python)
    return backends


def server_environment(base: dict | None = None) -> dict:
    """The stub must import stitch and torch (it ignores PYTHONPATH: STITCH_SITE_DIRS, read by
    the generated model.py) and link this interpreter's libpython."""
    sites = [p for p in site.getsitepackages() if os.path.isdir(p)]
    triton_libs = os.path.join(os.path.dirname(os.path.dirname(bundled_triton())),
                               "nvidia_pytriton.libs")
    lib = libpython()
    libdirs = [os.path.dirname(lib)] if lib else []
    env = dict(base if base is not None else os.environ)
    current = [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    env["LD_LIBRARY_PATH"] = os.pathsep.join([*libdirs, triton_libs, *current])
    env["STITCH_SITE_DIRS"] = os.pathsep.join(sites)
    return env


def command(repository: str, backends: str, options) -> list[str]:
    return [os.path.join(bundled_triton(), "bin", "tritonserver"),
            "--model-repository", repository, "--backend-directory", backends,
            "--http-address", options.host, "--http-port", str(options.http_port),
            "--grpc-address", options.host, "--grpc-port", str(options.grpc_port),
            "--metrics-port", str(options.metrics_port)]


def serve_repository(path: str, options) -> int:
    """Write a repository for ``path`` into a temporary folder and run Triton on it until
    SIGINT/SIGTERM; Triton's log (and the epilogue's records) go to this process's output."""
    import logging

    log = logging.getLogger("stitch.serve")
    workdir = tempfile.mkdtemp(prefix="stitch-serve-repo-")
    try:
        return _serve_in(workdir, path, options, log)
    finally:  # the repository is a copy of the artifact: nothing in it outlives the server
        shutil.rmtree(workdir, ignore_errors=True)


def _serve_in(workdir: str, path: str, options, log) -> int:
    from .triton_repo import write_repository

    repository = os.path.join(workdir, "repo")
    model_dir = write_repository(path, repository, model_name=options.model_name,
                                 max_batch_size=options.max_batch_size)
    backends = backend_directory(workdir)
    env = server_environment()
    env["STITCH_SERVE_LOG_LEVEL"] = options.log_level
    log.info("serving %s as model %r through Triton's Python backend (repository %s; "
             "libpython %s)", path, options.model_name, model_dir,
             libpython() or sysconfig.get_config_var("LIBDIR"))
    log.info("%s", guards_line(_manifest_of(path)))
    proc = subprocess.Popen(command(repository, backends, options), env=env)

    def forward(signum, frame):
        proc.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = proc.wait()
    log.info("stopped (Triton exited with %s)", code)
    return 0 if code in (0, -signal.SIGTERM) else code


def _manifest_of(path: str) -> dict:
    """The artifact's manifest (the artifact is checked, no compiled code loaded)."""
    if path.endswith(".onnx"):
        from ..deploy.onnx_artifact import read_onnx

        return read_onnx(path)[0]
    from ..deploy.artifact import read_manifest

    return read_manifest(path)[0]

