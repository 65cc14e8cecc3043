"""What a verification refusal tells the user to change: the paragraph after its finding."""

from __future__ import annotations

import torch

from capture import torch_messages as tm

WHY = "\nWhy: "  # starts the paragraph a refusal's message gives its cause in


def guard_hint(error: BaseException | None) -> str:
    """Why a program's own input guard failed, and what to change."""
    if not (isinstance(error, AssertionError) and tm.matches(tm.GUARD_FAILED, str(error))):
        return ""
    return (f"{WHY}torch.export specialised the program to what the examples it traced "
            "had there (a size the model tests, or a non-tensor input it reads), and this "
            "input has another. What you can do: give examples that differ there (a size "
            "they differ in is exported dynamic; torch.export fixes one traced at 0 or 1, so "
            "let one example be at least 2 in every dimension that varies), pass "
            "dynamic_shapes, or export one program per such value.")


def tolerance_hint(actual, expected) -> str:
    """For a floating-point output that differs a little (same shape, a few elements): how
    to compare more loosely, where the difference is rounding (torch.export's decompositions
    can order a sum or an interpolation otherwise than eager does)."""
    if not (isinstance(actual, torch.Tensor) and actual.shape == expected.shape
            and expected.is_floating_point() and actual.is_floating_point()):
        return ""
    diff = (actual.double() - expected.double()).abs()
    largest = diff.nan_to_num(0.0).max().item() if diff.numel() else 0.0
    scale = expected.double().abs().nan_to_num(0.0).max().item() if diff.numel() else 0.0
    if not 0.0 < largest <= 1e-3 * max(scale, 1.0):
        return ""
    return (f"\nWhat you can do: if a difference of {largest:.3g} is rounding (the program "
            "computes in another order), compare more loosely: stitch.Settings(atol="
            f"{largest * 10:.1g}) (or rtol); otherwise the program is wrong here: please "
            "report it with this model")
