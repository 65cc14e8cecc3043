"""Imports run one way: the program and the run-time helper never import the deploy stage at
module level (``program.save`` imports it when called), and deploy does not import the
program module."""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "stitch")


def _module_level_imports(path: str) -> set[str]:
    tree = ast.parse(open(path).read())
    found = set()
    for node in tree.body:  # module level only: imports inside functions are call-time
        if isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


@pytest.mark.parametrize("module", ["program.py", "running.py"])
def test_program_side_never_imports_deploy_at_module_level(module):
    imports = _module_level_imports(os.path.join(ROOT, module))
    assert not any("deploy" in name or "compiled" in name for name in imports), imports


def test_deploy_does_not_import_the_program_module():
    for name in os.listdir(os.path.join(ROOT, "deploy")):
        if name.endswith(".py"):
            source = open(os.path.join(ROOT, "deploy", name)).read()
            assert "from ..program import" not in source, name
