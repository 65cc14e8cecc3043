"""Triton's Python stub must link the running interpreter's libpython.

PyTriton starts a real Triton server whose Python-backend stub embeds ``libpython3.X``. If
the loader finds another build of that library (the system's, under a pyenv or uv venv),
model load fails deep inside multiprocessing with ``'_thread.RLock' object has no attribute
'_recursion_count'``. Pointing ``LD_LIBRARY_PATH`` at this interpreter's LIBDIR first avoids
it; ``explain_failure`` turns the symptom into an error that says so.
"""

from __future__ import annotations

import os
import sysconfig

from ..errors import ServeError

SYMPTOM = "_recursion_count"


def libpython() -> str | None:
    """This interpreter's shared libpython, or None (a static build)."""
    libdir, name = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY")
    if not libdir or not name or not name.endswith(".so"):
        return None
    path = os.path.join(libdir, name)
    return path if os.path.exists(path) else None


def prepare() -> str:
    """Put this interpreter's LIBDIR first on LD_LIBRARY_PATH (inherited by the Triton server
    and its stubs); returns a line saying what was done."""
    lib = libpython()
    if lib is None:
        return ("this Python has no shared libpython: Triton's stub will link the system's; "
                "if model load fails, serve from a venv made with the system python3")
    libdir = os.path.dirname(lib)
    current = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    if not current or current[0] != libdir:
        os.environ["LD_LIBRARY_PATH"] = os.pathsep.join([libdir, *current])
    return f"Triton's Python stub links {lib} (LD_LIBRARY_PATH starts with {libdir})"


def explain_failure(log_text: str) -> ServeError | None:
    if SYMPTOM not in log_text:
        return None
    lib = libpython() or "(this Python has no shared libpython)"
    return ServeError(
        "Triton's Python stub loaded a libpython that is not this interpreter's (found "
        f"'{SYMPTOM}' missing in its log). This interpreter's library is {lib}. Start the "
        "server with LD_LIBRARY_PATH set to "
        f"{sysconfig.get_config_var('LIBDIR')} (stitch serve does this unless "
        "STITCH_SERVE_KEEP_LD_LIBRARY_PATH=1), or build the serving venv from the system "
        "python3.")
