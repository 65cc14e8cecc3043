"""The layout rules of ``stitch/`` and ``capture/``, checked from the source with ``ast``.

1. No import cycle between modules. Function-local imports count like module-level ones: an
   import moved into a function still ties the two modules together, it only hides the knot.
2. Imports run downward. ``capture`` never imports ``stitch`` (PACKAGES, bottom first); inside
   ``stitch`` a stage imports only from its own layer and the layers below it (LAYERS).
3. No underscore name is imported from another module: a name used elsewhere is public.
4. No module is longer than MAX_LINES lines.

``make lint`` runs ``python -m tests.layout`` (one line per violation, exit status 1 when there
is one); ``tests/test_layout.py`` runs the same check on the repository and on small fake
packages that break each rule.
"""

from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass

import networkx as nx

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# bottom first: a package may import the packages before it, never those after it
PACKAGES = ("capture", "stitch")

# The stages of ``stitch``, bottom first: a stage imports from its own layer and the layers
# before it. A stage is a sub-package (``synthesize``) or a module directly in ``stitch/``
# (``pipeline``); ``__init__`` is the package itself. This is the import order, which is not
# the run order: ``lower`` holds passes over any torch.export graph and knows nothing of how
# the graph was stitched, so the verifier may use two of its graph cleanups; ``deploy``
# compiles, profiles, saves and loads what the stages below produced; ``program`` (the result
# of export) saves through ``deploy``; ``pipeline`` calls every stage, and the public API and
# the command line sit on top.
LAYERS: tuple[tuple[str, ...], ...] = (
    # errors, settings, and helpers that import nothing of stitch but these
    ("errors", "settings", "scratch", "version", "pytree_types", "call_inputs", "const_buffers",
     "example_shapes", "number_inputs", "caught_errors", "progress", "heap"),
    ("plan", "findings"),  # decisions and their reasons
    ("epilogue",),  # side effects recorded while tracing, replayed after the graph
    ("synthesize",),  # the rewrites and the run-time helpers rewritten code calls
    ("running", "python_state", "refusals", "first_runs", "read_asserts", "export_wrapper"),  # a graph run with its epilogue; state found; what is exported
    ("lower",),  # backends and passes over a torch.export graph
    ("verify",),  # the program against the model, on every example and forced side
    ("report", "size_rewrite", "first_use", "strategies"),
    ("exporting", "plain_export", "rewrite_export", "probe_retry", "pinned_reads"),
    ("deploy",),  # compile, profile, save, load; TensorRT engines and plans
    ("program",),  # what export returns
    ("finish",),  # an exported program verified, and its report
    ("serve",),  # serving an artifact
    ("pipeline",),  # stitch.export: the list of strategies
    ("__init__", "cli", "demo", "demo_model", "__main__"),  # the public API, the CLI, the demo
)

# The folders of ``synthesize``, bottom first, by the same rule: analysis knows code, operators
# run in rewritten code, canonicalizing passes may emit operator calls, conversion uses all of
# them, and the package itself (the list of passes) sits on top.
SYNTHESIZE_LAYERS: tuple[tuple[str, ...], ...] = (
    ("analysis",), ("operators",), ("canonicalize",), ("convert",), ("__init__",),
)

MAX_LINES = 430


@dataclass(frozen=True)
class Import:
    """One import of a module of the checked packages by another."""

    source: str  # importing module, dotted
    target: str  # imported module, dotted
    path: str  # importing file, relative to the root
    line: int
    names: tuple[str, ...]  # the names taken ``from`` the target (empty for ``import x``)
    local: bool  # inside a function or class body

    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def said(self) -> str:
        how = "in a function" if self.local else "at module level"
        taken = f" ({', '.join(self.names)})" if self.names else ""
        return f"imports {self.target}{taken} {how}"


def modules(root: str, packages: tuple[str, ...]) -> dict[str, tuple[str, bool]]:
    """Dotted module name -> (path relative to root, is a package ``__init__``)."""
    found = {}
    for package in packages:
        for directory, _dirs, files in os.walk(os.path.join(root, package)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.relpath(os.path.join(directory, name), root)
                dotted = path[:-3].replace(os.sep, ".")
                is_package = name == "__init__.py"
                if is_package:
                    dotted = dotted.rsplit(".", 1)[0]
                found[dotted] = (path, is_package)
    return found


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    parts = parts[:len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _known(name: str, known: dict) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(root: str, packages: tuple[str, ...]) -> list[Import]:
    """Every import of one checked module by another, module-level and function-local."""
    known = modules(root, packages)
    found = []
    for module, (path, is_package) in sorted(known.items()):
        with open(os.path.join(root, path)) as f:
            tree = ast.parse(f.read(), path)
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            taken: dict[str, list[str]] = {}
            if isinstance(node, ast.Import):
                for alias in node.names:
                    taken.setdefault(_known(alias.name, known) or "", [])
            elif isinstance(node, ast.ImportFrom):
                base = _base(module, is_package, node)
                for alias in node.names:
                    if f"{base}.{alias.name}" in known:  # a submodule: ``from . import x``
                        taken.setdefault(f"{base}.{alias.name}", [])
                    else:
                        taken.setdefault(_known(base, known) or "", []).append(alias.name)
            for target, names in taken.items():
                if target and target != module:
                    found.append(Import(module, target, path, node.lineno, tuple(names),
                                        id(node) not in top))
    return found


def stage(module: str, package: str = "") -> str:
    """``stitch.lower.backends`` -> ``lower``; ``stitch.pipeline`` -> ``pipeline``; inside
    ``package`` (dotted), the part right below it."""
    package = package or module.split(".")[0]
    parts = module[len(package):].lstrip(".").split(".")
    return parts[0] if parts[0] else "__init__"


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def cycles(found: list[Import]) -> list[str]:
    """One cycle per knot (strongly connected set of modules), each import named."""
    graph = nx.DiGraph()
    for imp in found:
        if not graph.has_edge(imp.source, imp.target):
            graph.add_edge(imp.source, imp.target, imp=imp)
    problems = []
    for knot in sorted(nx.strongly_connected_components(graph), key=min):
        if len(knot) < 2:
            continue
        edges = nx.find_cycle(graph.subgraph(knot), source=min(knot))
        steps = "; ".join(f"{graph.edges[u, v]['imp'].where()} {graph.edges[u, v]['imp'].said()}"
                          for u, v in edges)
        problems.append(f"import cycle through {len(knot)} modules ({', '.join(sorted(knot))}): "
                        f"{steps}. Move what both sides need into a module below both.")
    return problems


def upward(found: list[Import], packages: tuple[str, ...],
           layers: dict[str, tuple[tuple[str, ...], ...]]) -> list[str]:
    problems = []
    for imp in found:
        source_package, target_package = imp.source.split(".")[0], imp.target.split(".")[0]
        if packages.index(target_package) > packages.index(source_package):
            problems.append(f"{imp.where()}: {imp.said()}: {source_package} sits below "
                            f"{target_package} and never imports it")
            continue
        for package, order in layers.items():
            if not (_inside(imp.source, package) and _inside(imp.target, package)):
                continue
            rank = {name: i for i, layer in enumerate(order) for name in layer}
            low, high = stage(imp.source, package), stage(imp.target, package)
            if high in rank and low in rank and rank[high] > rank[low]:
                problems.append(f"{imp.where()}: {imp.said()}: stage {high!r} sits above stage "
                                f"{low!r} of {package} in tests/layout.py; move the shared "
                                "piece down or the importing code up")
    return problems


def unplaced(known: dict[str, tuple[str, bool]],
             layers: dict[str, tuple[tuple[str, ...], ...]]) -> list[str]:
    problems = []
    for package, order in layers.items():
        placed = {name for layer in order for name in layer}
        for module, (path, _is_package) in sorted(known.items()):
            if _inside(module, package) and stage(module, package) not in placed:
                problems.append(f"{path}: stage {stage(module, package)!r} is in no layer of "
                                f"{package} in tests/layout.py; add it where its imports put it")
    return problems


def underscores(found: list[Import]) -> list[str]:
    return [f"{imp.where()}: imports {name} from {imp.target}: a name used by another module "
            "is public; rename it without the underscore"
            for imp in found for name in imp.names
            if name.startswith("_") and not (name.startswith("__") and name.endswith("__"))]


def too_long(root: str, known: dict[str, tuple[str, bool]], max_lines: int) -> list[str]:
    problems = []
    for path, _is_package in sorted(known.values()):
        with open(os.path.join(root, path)) as f:
            count = len(f.read().splitlines())
        if count > max_lines:
            problems.append(f"{path}: {count} lines, over the {max_lines}-line budget; split it "
                            "along an interface")
    return problems


def check(root: str = REPO, packages: tuple[str, ...] = PACKAGES,
          layers: dict[str, tuple[tuple[str, ...], ...]] | None = None,
          max_lines: int = MAX_LINES) -> list[str]:
    """Every violation of the layout rules under ``root``, one line each."""
    layers = ({"stitch": LAYERS, "stitch.synthesize": SYNTHESIZE_LAYERS} if layers is None
              else layers)
    known = modules(root, packages)
    found = imports(root, packages)
    return (cycles(found) + upward(found, packages, layers) + unplaced(known, layers)
            + underscores(found) + too_long(root, known, max_lines))


def main() -> int:
    problems = check()
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
