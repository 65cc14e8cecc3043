"""deploy: profile candidates, pick what to deploy, write and read the artifact; TensorRT
engines built from it (``tensorrt_engine``) and the TensorRT plan (``tensorrt``)."""

from .artifact import ArtifactError, save
from .load import load
from .profile import Candidate, DeploymentDecision, select

__all__ = ["ArtifactError", "Candidate", "DeploymentDecision", "load", "save", "select"]
