"""What stitch corrects in torch while it traces, each in its own module, entered together
wherever stitch traces (capture, export, lowering): cond-arm assertions kept to their arm
(``branch_asserts``), fake kernels' data-dependent sizes counted from 0 (``dynamic_sizes``),
symbolic booleans compared by structure in Inductor's post-grad update (``symbool_same``),
a cond arm's nested subgraphs kept when torch deletes unused submodules
(``nested_subgraphs``), a cond's operand that became a number named in its arms
(``cond_number_operands``), torch.cond's check for arms writing their operands made by
Dynamo alone, not again on every call (``cond_schema``), a cond output's size that the arms'
conditions make equal on both sides kept, not made a new size (``arm_sizes``), ``copy_``'s
check for a destination overlapping itself made at the traced sizes with no guard where it
finds none (``internal_overlap``), Dynamo's ``max``/``min`` of symbolic ints told apart
while non-strict export has rebound the builtins (``dynamo_min_max``). Where stitch
lowers, also torch's
n-ary symbolic min and max given Inductor lowerings (``nary_sym_ops``; not while capturing
or exporting, which never lower: importing Inductor's lowerings costs about half a second),
and Inductor's questions on data-dependent sizes answered where the answer is exact or only
picks a layout (``lowering_guards``), and a cond's operands laid out as its arms were compiled
for (``cond_operand_strides``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .arm_sizes import arm_sizes_merged
from .branch_asserts import branch_local_asserts
from .cond_number_operands import cond_number_operands_named
from .cond_operand_strides import cond_operands_laid_out
from .cond_schema import cond_schema_checked_once
from .dynamic_sizes import sizes_from_zero
from .dynamo_min_max import dynamo_min_max_kept
from .internal_overlap import overlap_at_hints
from .lowering_guards import undecided_sizes_answered
from .nary_sym_ops import nary_sym_ops_lowered
from .nested_subgraphs import nested_subgraphs_kept
from .symbool_same import symbool_by_structure


@contextlib.contextmanager
def tracing_fixes() -> Iterator[None]:
    with branch_local_asserts(), sizes_from_zero(), symbool_by_structure(), \
            nested_subgraphs_kept(), cond_number_operands_named(), \
            cond_schema_checked_once(), arm_sizes_merged(), overlap_at_hints(), \
            dynamo_min_max_kept():
        yield


@contextlib.contextmanager
def lowering_fixes() -> Iterator[None]:
    """``tracing_fixes()``, and what only Inductor's lowering needs."""
    with tracing_fixes(), nary_sym_ops_lowered(), \
            undecided_sizes_answered(), cond_operands_laid_out():
        yield
