"""Serving stage: an artifact behind Triton Inference Server (``stitch serve``), or a Triton
model repository for a stock deployment (``stitch export --triton-repo``)."""

from .spec import BatchingDecision, ServeSpec, TensorSpec
from .triton_repo import write_repository
from .variant import Variant, choose_variant

__all__ = ["BatchingDecision", "ServeSpec", "TensorSpec", "Variant", "choose_variant",
           "write_repository"]
