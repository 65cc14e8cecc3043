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


@functools.cache
def aoti_load_failure(device: str) -> str | None:
    """None when a tiny AOTInductor package compiles, loads and runs on ``device`` in a
    subprocess; otherwise what happened (the signal or the error's last line)."""
    with tempfile.TemporaryDirectory(prefix="stitch-aoti-probe-") as tmp:
        code = PROBE.format(device=device, path=os.path.join(tmp, "probe.pt2"))
        try:
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  timeout=600)
        except subprocess.TimeoutExpired:
            return "a tiny AOTInductor package took over 600 s to compile and load"
    if "AOTI-LOADS" in done.stdout:
        return None
    how = (f"the process died with signal {-done.returncode}" if done.returncode < 0
           else (done.stderr.strip().splitlines() or ["no output"])[-1][:300])
    return (f"a tiny AOTInductor package on {device} does not load in this torch: {how} "
            "(probed in a subprocess)")
