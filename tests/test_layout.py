"""The layout rules (tests/layout.py) hold for stitch/ and capture/, and the checker finds each
kind of violation in a small fake package built here."""

from __future__ import annotations

import os
import textwrap

from tests.layout import LAYERS, check, imports

# a fake repository: ``base`` below ``app``; inside ``app``, stage ``core`` below ``top``
PACKAGES = ("base", "app")
APP_LAYERS = {"app": (("core",), ("top", "__init__"))}


def _write(root, files: dict[str, str]) -> None:
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(textwrap.dedent(text))


def _clean(root) -> None:
    _write(root, {
        "base/__init__.py": "",
        "base/util.py": "def helper():\n    return 1\n",
        "app/__init__.py": "from .top import run\n__version__ = '1'\n",
        "app/core/__init__.py": "",
        "app/core/values.py": "from base.util import helper\n\nVALUE = helper()\n",
        "app/core/more.py": "from .values import VALUE\n",
        "app/top.py": """\
            from .core.values import VALUE


            def run():
                from .core import more
                return VALUE, more
            """,
    })


def _check(root, max_lines: int = 430) -> list[str]:
    return check(str(root), PACKAGES, APP_LAYERS, max_lines)


def test_stitch_and_capture_keep_the_layout():
    problems = check()
    assert problems == [], "\n".join(problems)


def test_every_stage_of_stitch_is_in_one_layer():
    stages = [name for layer in LAYERS for name in layer]
    assert len(stages) == len(set(stages))


def test_the_stages_import_one_way():
    """The result of a run sits above the stages that make it: the runtime helper below
    deploy (a deployment runs the epilogue), deploy below the program (``program.save``
    deploys), the pipeline above all of them, the public API on top."""
    rank = {name: i for i, layer in enumerate(LAYERS) for name in layer}
    order = ["errors", "plan", "epilogue", "synthesize", "running", "verify", "exporting",
             "deploy", "program", "serve", "pipeline", "__init__"]
    assert [rank[name] for name in order] == sorted(rank[name] for name in order)
    assert len({rank[name] for name in order}) == len(order)


def test_a_clean_fake_package_passes(tmp_path):
    _clean(tmp_path)
    assert _check(tmp_path) == []


def test_function_local_and_relative_imports_are_edges(tmp_path):
    _clean(tmp_path)
    found = {(i.source, i.target, i.local) for i in imports(str(tmp_path), PACKAGES)}
    assert ("app.top", "app.core.more", True) in found  # ``from .core import more``
    assert ("app.core.more", "app.core.values", False) in found
    assert ("app.core.values", "base.util", False) in found


def test_a_circle_fails_naming_both_imports(tmp_path):
    _clean(tmp_path)
    _write(tmp_path, {"app/core/values.py": """\
        from base.util import helper

        VALUE = helper()


        def later():
            from .more import VALUE as again  # the circle, hidden in a function
            return again
        """})
    problems = _check(tmp_path)
    assert len(problems) == 1, problems
    assert problems[0].startswith("import cycle through 2 modules (app.core.more, "
                                  "app.core.values)")
    assert "app/core/values.py:7 imports app.core.more (VALUE) in a function" in problems[0]
    assert "app/core/more.py:1 imports app.core.values (VALUE) at module level" in problems[0]


def test_a_lower_package_importing_a_higher_one_fails(tmp_path):
    _clean(tmp_path)
    _write(tmp_path, {"base/util.py": """\
        def helper():
            from app.top import run
            return run
        """})
    problems = [p for p in _check(tmp_path) if "cycle" not in p]
    assert problems == ["base/util.py:2: imports app.top (run) in a function: base sits below "
                        "app and never imports it"]


def test_a_lower_stage_importing_a_higher_one_fails(tmp_path):
    _clean(tmp_path)
    _write(tmp_path, {"app/core/more.py": "from .values import VALUE\nfrom ..top import run\n"})
    problems = [p for p in _check(tmp_path) if "cycle" not in p]
    assert len(problems) == 1, problems
    assert problems[0].startswith("app/core/more.py:2: imports app.top (run) at module level: "
                                  "stage 'top' sits above stage 'core'")


def test_a_stage_in_no_layer_fails(tmp_path):
    _clean(tmp_path)
    _write(tmp_path, {"app/extra.py": "X = 1\n"})
    assert _check(tmp_path) == ["app/extra.py: stage 'extra' is in no layer of app in "
                                "tests/layout.py; add it where its imports put it"]


def test_an_underscore_name_from_another_module_fails(tmp_path):
    _clean(tmp_path)
    _write(tmp_path, {
        "base/util.py": "def helper():\n    return 1\n\n\ndef _private():\n    return 2\n",
        "app/core/version.py": "__version__ = '1'\n",
        "app/core/more.py": "from base.util import _private\nfrom .version import __version__\n",
    })
    assert _check(tmp_path) == [  # a dunder (``__version__``) is public
        "app/core/more.py:1: imports _private from base.util: a name used by another module "
        "is public; rename it without the underscore"]


def test_a_module_over_the_line_budget_fails(tmp_path):
    _clean(tmp_path)
    _write(tmp_path, {"app/core/more.py": "from .values import VALUE\n" + "X = 1\n" * 10})
    assert _check(tmp_path, max_lines=11) == []
    assert _check(tmp_path, max_lines=10) == [
        "app/core/more.py: 11 lines, over the 10-line budget; split it along an interface"]


def test_folders_inside_a_stage_import_one_way(tmp_path):
    """A stage's own folders have an order too (``synthesize``: analysis, operators,
    canonicalize, convert): a lower folder importing a higher one fails, naming the stage."""
    _clean(tmp_path)
    _write(tmp_path, {
        "app/core/low/__init__.py": "",
        "app/core/low/reads.py": "from ..high.runs import RUN\n",
        "app/core/high/__init__.py": "",
        "app/core/high/runs.py": "RUN = 1\n",
    })
    layers = {**APP_LAYERS, "app.core": (("low",), ("high",), ("values", "more", "__init__"))}
    problems = check(str(tmp_path), PACKAGES, layers, 430)
    assert len(problems) == 1
    assert "app/core/low/reads.py:1" in problems[0]
    assert "stage 'high' sits above stage 'low' of app.core" in problems[0]

