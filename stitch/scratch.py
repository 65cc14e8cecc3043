"""stitch's scratch directory: one per process, removed when the process exits.

Builds stitch makes on its own account (an AOTInductor package for each candidate profiled,
a TensorRT engine with no path given, the fuzz generator's modules) go here, not loose in
the system's temporary directory, where every run left them behind (tens of MB per AOTI
package). What the user asks to keep, they save (``stitch.save``, a ``path=``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

_DIR: list[str] = []


def scratch_dir() -> str:
    """This process's scratch directory (made on first use)."""
    if not _DIR or not os.path.isdir(_DIR[0]):
        _DIR[:] = [tempfile.mkdtemp(prefix="stitch-")]
        atexit.register(shutil.rmtree, _DIR[0], True)
    return _DIR[0]


def scratch_file(suffix: str, prefix: str = "stitch-") -> str:
    """A fresh path in the scratch directory; the file exists (empty)."""
    handle, path = tempfile.mkstemp(suffix=suffix, prefix=prefix, dir=scratch_dir())
    os.close(handle)
    return path
