"""stitch's own builds go to one scratch directory per process, removed at exit
(stitch/scratch.py), so runs leave no AOTInductor package (tens of MB) per candidate, nor
a directory per fuzz program, in the system's temporary directory."""

from __future__ import annotations

import os
import subprocess
import sys

from stitch.scratch import scratch_dir, scratch_file


def test_files_share_one_directory():
    a, b = scratch_file(".pt2", "aoti-"), scratch_file(".engine", "trt-")
    assert os.path.dirname(a) == os.path.dirname(b) == scratch_dir()
    assert a != b and os.path.exists(a) and os.path.basename(a).startswith("aoti-")


def test_the_directory_goes_when_the_process_exits():
    code = ("from stitch.scratch import scratch_file; import os; p = scratch_file('.pt2'); "
            "open(p, 'wb').write(b'x' * 1000); print(os.path.dirname(p))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=os.path.dirname(root), env={**os.environ, "PYTHONPATH": root},
                          check=True)
    folder = done.stdout.strip()
    assert folder and not os.path.exists(folder), folder


def test_fuzz_programs_are_written_into_it():
    from tests.zoo.fuzz import load_program

    source = ("import torch\nclass Fuzz(torch.nn.Module):\n"
              "    def forward(self, x):\n        return x\n")
    first, second = load_program(source), load_program(source)
    assert os.path.dirname(first.__file__) == os.path.dirname(second.__file__) == scratch_dir()
