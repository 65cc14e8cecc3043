"""verify: the stitched program against the model, on every example and every branch."""

from .observe import Appends, Check, observe
from .verifier import verify

__all__ = ["Appends", "Check", "observe", "verify"]
