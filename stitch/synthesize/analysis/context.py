"""What a rewrite pass knows about the function it rewrites, and what it decided."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field

from capture import BreakKind, BreakSite
from capture.size_tests import ONE_ARM_RULE, SIZE_RULES
from capture.source import warn_aliases

from ...plan import Action, Decision


class RewriteRefused(Exception):
    """A pass cannot rewrite a statement; the message says why (it becomes a Decision)."""


@dataclass
class RewriteContext:
    filename: str
    qualname: str
    sites: dict[int, BreakSite]  # line -> site, for sites inside this function
    dependent_lines: set[int]  # lines of data-dependent conditions (census + sites)
    round: int = 1
    decisions: list[Decision] = field(default_factory=list)
    counter: int = 0
    func: ast.FunctionDef | None = None
    deferred_lines: set[int] = field(default_factory=set)  # conds whose branches hold effects
    sides: dict[int, bool] = field(default_factory=dict)  # line -> side example 0 took
    force_guard: set[int] = field(default_factory=set)  # lines to specialise, not cond
    guard_reason: str = ""  # why those lines are specialised (a failed cond attempt)
    # inside the arms of a data-dependent if every statement is traced by torch.cond, also
    # the ones no example ran: scalar reads and tensor-counted loops there are rewritten too
    arm_scalar_lines: set[int] = field(default_factory=set)
    # lines of unrolled loop bodies (bounded_loop): their scalar reads stay Python numbers,
    # symbolic in the cond arm, as torch.export reads them
    unrolled_lines: set[int] = field(default_factory=set)
    unrolled_names: frozenset[str] = frozenset()  # their indices and counts (arm_facts)
    arm_loop_lines: set[int] = field(default_factory=set)
    # ``while`` loops with a counter bound made loops over a constant range (bounded_while):
    # not loops counted by data
    bounded_lines: set[int] = field(default_factory=set)
    arm_assert_lines: set[int] = field(default_factory=set)  # a check is the same assert
    # line -> why the rest of the function became the arms' continuation (one-sided names)
    continuations: dict[int, str] = field(default_factory=dict)
    flag_continuations: bool = True  # Settings.flag_continuations
    warn_names: frozenset[str] = frozenset()  # names bound to warnings.warn in the module
    helpers: frozenset[str] = frozenset()  # names of helpers with side effects it calls
    # names of helpers that write parameters in place -> those (position, name)
    writers: dict[str, tuple] = field(default_factory=dict)
    kept_loops: dict[int, str] = field(default_factory=dict)  # loops left: line -> why
    # ifs whose cond failed on an earlier attempt (sides of different ranks or kinds): line ->
    # torch's reason; each takes the rest of the function into its arms
    rest_lines: dict[int, str] = field(default_factory=dict)
    # continuation across a return (caller_continuation.py): this function returns through
    # the continuation its caller passes; and line -> callee whose call takes the rest of it
    takes_rest: bool = False
    # what this function returns is what the program returns (returns_to_entry)
    to_outputs: bool = False
    # top-level statements holding a branch whose names come out in two structures: id ->
    # (statement, the branch's label, the names); the rest after each is split on them
    split_after: dict = field(default_factory=dict)
    rest_calls: dict[int, str] = field(default_factory=dict)
    rest_refused: set[int] = field(default_factory=set)  # lines of rest_calls left as they are
    tail_calls: set[int] = field(default_factory=set)  # `return g(...)` passing ours on
    # helpers reads are passed to (number_helpers.py): target key -> HelperCall
    number_helpers: dict = field(default_factory=dict)
    # functions whose result is a read (returned_reads.py): target keys; calls of them are
    # reads here. And whether this function returns one (number_ops sets it)
    read_returners: frozenset = frozenset()
    read_call_lines: frozenset = frozenset()  # lines where a call chain reached one
    # this function's parameters a run showed holding reads (reached_helpers.py)
    read_params: frozenset = frozenset()
    returns_read: bool = False
    # label of each cond made -> the model's tests it was made from (origins.py)
    origins: dict[str, set] = field(default_factory=dict)
    # the function's own globals and the names its closure holds (torch_names.py: a name is
    # resolved as Python resolves it, the closure before the globals)
    module_globals: dict | None = None
    freevars: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self.warn_names = self.warn_names or warn_aliases(self.filename)

    def is_size_test(self, line: int) -> bool:
        """The ``if`` at ``line`` tests an input's size that torch.export decided for the
        examples (capture/size_tests.py): its cond is on the size, and it is never
        specialised."""
        site = self.sites.get(line)
        return site is not None and site.rule in SIZE_RULES

    def is_one_arm(self, line: int) -> bool:
        """The ``if`` at ``line`` is such a test whose general arm (the one most sizes
        take) is tried alone at every size (convert/one_arm.py)."""
        site = self.sites.get(line)
        return site is not None and site.rule == ONE_ARM_RULE

    def next_id(self) -> int:
        self.counter += 1
        return self.counter

    def site_at(self, node: ast.AST) -> BreakSite | None:
        end = getattr(node, "end_lineno", None) or node.lineno
        header_end = getattr(getattr(node, "test", None), "end_lineno", None) or end
        for line in range(node.lineno, header_end + 1):
            if line in self.sites:
                return self.sites[line]
        return None

    def label(self, node: ast.AST) -> str:
        """A stable name for the rewritten place: site id (prefixed by the round that found
        it, after the first) or its line."""
        given = getattr(node, "_stitch_label", None)  # a branch stitch built names its own
        if given is not None:  # (break_guard: its loop's guard, whose lines hold other sites)
            return given
        site = self.site_at(node)
        # no site: its line, and its file (two files' branches at one line are two sites:
        # one's taken side must not stand for the other's)
        return site.id if site is not None else f"L{node.lineno}@{os.path.basename(self.filename)}"

    def lines_of_kind(self, *kinds: BreakKind) -> set[int]:
        return {ln for ln, s in self.sites.items() if s.kind in kinds}

    def loop_lines(self) -> set[int]:
        """Lines of the loops counted by a tensor (census sites and ones found in branch
        arms), and of loops over a tensor of data-dependent length (a dynamic-shape break on
        the ``for`` line; the loops over ``nonzero()`` among them ``nonzero_loop`` already
        took)."""
        return (self.lines_of_kind(BreakKind.LOOP) | self.arm_loop_lines
                | self.lines_of_kind(BreakKind.DYNAMIC_SHAPE)
                | self.lines_of_kind(BreakKind.UNSUPPORTED_CALL)) - self.bounded_lines

    def decide(self, action: Action, node: ast.AST, reason: str) -> None:
        site = self.site_at(node)
        self.decisions.append(Decision(
            action=action, location=f"{self.filename}:{node.lineno}", function=self.qualname,
            reason=reason, site=self.label(node) if site else "", round=self.round,
        ))
