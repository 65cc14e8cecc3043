"""Moved to ``stitch.deploy.compiled`` (a deployment belongs to the deploy stage); kept so
``from stitch.compiled import CompiledProgram`` goes on working."""

from .deploy.compiled import CompiledProgram, LoadedProgram

__all__ = ["CompiledProgram", "LoadedProgram"]
