"""Branch-site marks: which ``cond``/``where`` in the exported graph came from which site.

While stitch exports, every synthesized branch passes its predicate through
``stitch::branch_site(predicate, site)`` (a copy of the predicate). The mark is traced like
any op at every depth: a top-level cond, a cond inside another cond's branch (traced by
Dynamo), a ``where``, and under ``strict=True``. After export:

- ``read_marks`` says, for each site, which enclosing sites (and sides) must be taken for
  it to run at all;
- ``strip_marks`` removes the marks (the deployed graph has none), or, on a copy, replaces
  chosen sites' predicates with constants: verification forces each side the examples
  miss, a nested one together with the sides of the branches around it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from capture.branch_asserts import truth_of
from capture.branch_truths import needed_of_node, note_predicate

_MARKING = False  # a module global (not thread state): Dynamo reads it inside cond branches


@torch.library.custom_op("stitch::branch_site", mutates_args=())
def branch_site(predicate: torch.Tensor, site: str) -> torch.Tensor:
    return predicate.clone()


@branch_site.register_fake
def _(predicate: torch.Tensor, site: str) -> torch.Tensor:
    return torch.empty_like(predicate)


MARK = torch.ops.stitch.branch_site.default


@contextlib.contextmanager
def marking():
    """Mark branch predicates while the body runs (``stitch.export`` around torch.export)."""
    global _MARKING
    old, _MARKING = _MARKING, True
    try:
        yield
    finally:
        _MARKING = old


def exporting_now() -> bool:
    """Inside ``stitch.export``'s torch.export call (readable while Dynamo traces)."""
    return _MARKING


# a cond on which structure a value has (rt_split.py): its flag is what a user's branch
# decided, not a branch of its own; forcing it would pick a side the data did not give
SPLIT_SUFFIX = "#split"


def mark(site: str, predicate):
    """The predicate, marked with its site while exporting; unchanged otherwise, and for a
    split (``SPLIT_SUFFIX``)."""
    if _MARKING and isinstance(predicate, torch.Tensor) and not site.endswith(SPLIT_SUFFIX):
        return note_predicate(branch_site(predicate, site), predicate)
    return predicate


@dataclass(frozen=True)
class BranchSite:
    site: str
    within: tuple[tuple[str, bool], ...]  # enclosing (site, side), outermost first

    def forcing(self, side: bool) -> dict[str, bool]:
        """Predicates to force so that this site runs and takes ``side``."""
        return {**dict(self.within), self.site: side}


def _graph_modules(root: torch.nn.Module):
    return [m for m in root.modules() if isinstance(m, torch.fx.GraphModule)]


def _marks(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is MARK]


def read_marks(root: torch.nn.Module) -> dict[str, BranchSite]:
    """Every marked site in ``root`` and its subgraphs, with its enclosing branches. A site
    traced several times (once per layer) keeps the enclosing chain of its first instance;
    the chains agree unless the same code sits under different branches, and forcing
    applies to every instance of a site alike."""
    return {site: BranchSite(site, copies[0].chain)
            for site, copies in site_copies(root).items()}


def strip_marks(root: torch.nn.Module, force: dict[str, bool] | None = None) -> int:
    """Remove every mark from ``root`` and its subgraphs: its users read the predicate
    itself, or, for a site in ``force``, a constant of that side. Returns how many."""
    force = force or {}
    removed = 0
    for gm in _graph_modules(root):
        marks = _marks(gm)
        for node in marks:
            predicate, site = node.args
            if site in force:
                val = node.meta.get("val")
                shape = (tuple(val.shape) if val is not None
                         and all(isinstance(d, int) for d in val.shape) else ())
                with gm.graph.inserting_before(node):
                    value = gm.graph.call_function(
                        torch.full, (shape, force[site]), {"dtype": torch.bool})
                node.replace_all_uses_with(value)
            else:
                node.replace_all_uses_with(predicate)
            gm.graph.erase_node(node)
        if marks:
            gm.recompile()
        removed += len(marks)
    return removed


@dataclass(frozen=True)
class SiteCopy:
    """One traced copy of a site: the (site, side) chain reaching it, outermost first, the
    symbolic truth of each of those predicates (None: data) and of its own; ``needs``:
    what sizes its false and its true side need (``branch_truths.needed_of_node``), where
    known."""
    chain: tuple[tuple[str, bool], ...]
    conditions: tuple
    truth: object
    env: object
    needs: tuple = (None, None)


def site_copies(root: torch.nn.Module) -> dict[str, list[SiteCopy]]:
    """Every traced copy of every marked site (a continuation puts one in each arm), in
    the order the graphs hold them."""
    parent: dict[int, tuple[torch.fx.GraphModule, str, bool, object]] = {}
    modules = _graph_modules(root)
    for gm in modules:
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target is torch.ops.higher_order.cond:
                predicate, true_graph, false_graph = node.args[:3]
                if isinstance(predicate, torch.fx.Node) and predicate.target is MARK:
                    truth = truth_of(predicate)[0]
                    for side, ref in ((True, true_graph), (False, false_graph)):
                        parent[id(getattr(gm, ref.target))] = (gm, predicate.args[1], side,
                                                               truth)
    found: dict[str, list[SiteCopy]] = {}
    for gm in modules:
        chain, conditions, up = [], [], parent.get(id(gm))
        while up is not None:
            owner, site, side, truth = up
            chain.insert(0, (site, side))
            conditions.insert(0, truth)
            up = parent.get(id(owner))
        for node in _marks(gm):
            truth, env = truth_of(node.args[0])
            needs = tuple(needed_of_node(node.args[0], side) for side in (False, True))
            found.setdefault(node.args[1], []).append(
                SiteCopy(tuple(chain), tuple(conditions), truth, env, needs))
    return found
