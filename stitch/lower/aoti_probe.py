"""Does an AOTInductor package load in this process's torch on a device? Asked once, in a
subprocess: on an H100 with torch 2.11.0+cu130, ``aoti_load_package`` of a CUDA package
ended the process with a segmentation fault, which no ``except`` can catch. A backend that
would crash the caller is reported unavailable instead."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile

PROBE = """
import torch
device = {device!r}
model = torch.nn.Linear(4, 4).to(device)
x = torch.randn(2, 4, device=device)
ep = torch.export.export(model, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path={path!r})
runner = torch._inductor.aoti_load_package(path)
torch.testing.assert_close(runner(x), model(x))
print("AOTI-LOADS")
"""


def _probe(device: str, env: dict | None = None) -> str | None:
    """None when the probe loads; else how it failed."""
    with tempfile.TemporaryDirectory(prefix="stitch-aoti-probe-") as tmp:
        code = PROBE.format(device=device, path=os.path.join(tmp, "probe.pt2"))
        try:
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  timeout=600, env=env)
        except subprocess.TimeoutExpired:
            return "a tiny AOTInductor package took over 600 s to compile and load"
    if "AOTI-LOADS" in done.stdout:
        return None
    return (f"the process died with signal {-done.returncode}" if done.returncode < 0
            else (done.stderr.strip().splitlines() or ["no output"])[-1][:300])


def compiler_libstdcxx() -> str | None:
    """The libstdc++ of the C++ compiler Inductor builds with (None when none is found)."""
    for cc in (os.environ.get("CXX"), "g++", "c++"):
        if not cc:
            continue
        try:
            out = subprocess.run([cc, "-print-file-name=libstdc++.so.6"], capture_output=True,
                                 text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            continue
        if os.path.isabs(out) and os.path.exists(out):
            return os.path.realpath(out)
    return None


@functools.cache
def aoti_load_failure(device: str) -> str | None:
    """None when a tiny AOTInductor package compiles, loads and runs on ``device`` in a
    subprocess; otherwise what happened (the signal or the error's last line). A crash is
    probed again with the compiler's libstdc++ preloaded: on an H200 with torch 2.11 the
    package's ``std::regex`` crashed without it and loaded with it; the message then says
    how to start Python (the preload cannot be applied to a running process)."""
    how = _probe(device)
    if how is None:
        return None
    fix = ""
    lib = compiler_libstdcxx()
    if how.startswith("the process died") and lib and lib not in os.environ.get("LD_PRELOAD",
                                                                                 ""):
        env = dict(os.environ, LD_PRELOAD=lib)
        if _probe(device, env) is None:
            fix = (f"; it loads with the C++ compiler's libstdc++ preloaded: start Python with "
                   f"LD_PRELOAD={lib}")
    return (f"a tiny AOTInductor package on {device} does not load in this torch: {how} "
            f"(probed in a subprocess){fix}")
