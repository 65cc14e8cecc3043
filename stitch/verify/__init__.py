"""verify: the stitched program against the model, on every example and every branch."""

from .verifier import Appends, Check, observe, verify

__all__ = ["Appends", "Check", "observe", "verify"]
