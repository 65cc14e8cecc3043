"""verify: the stitched program against the model, on every example and every branch."""

from .verifier import Check, observe, verify

__all__ = ["Check", "observe", "verify"]
