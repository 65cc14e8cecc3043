"""deploy: profile candidates, pick what to deploy, write and read the artifact."""

from .artifact import ArtifactError, load, save
from .profile import Candidate, DeploymentDecision, select

__all__ = ["ArtifactError", "Candidate", "DeploymentDecision", "load", "save", "select"]
