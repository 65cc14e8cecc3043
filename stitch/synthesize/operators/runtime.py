"""What rewritten functions call at run time (bound to the name ``__stitch_rt__``).

Every helper behaves exactly like the Python it replaced when its inputs are plain Python
values, so a rewrite only changes behaviour where a tensor would have broken the graph. The
helpers live by concern; this module is the one namespace rewritten code sees:

    rt_values   scalar, fresh, UNBOUND   (values)
    rt_logical  logical_and/or/not, compare_chain, size_truth   (predicates)
    rt_predicate  pred, NO_BREAK_YET      (what a cond or a check takes as its condition)
    rt_symbolic number_kind, is_unbacked    (which numbers are known only at run time)
    rt_control  cond, go/keep_going, while_range, while_over, while_true, trip_count
                (control flow)
    rt_map      stacked, rows   (lists a loop over rows grows, stacked: stacked_lists)
    rt_write_back  write_back, hold_state   (attributes a branch updated, after it)
    rt_checks   check, guard, guarded_value                 (asserts, raises, guards)
    rt_effects  cond_effects   (branches with side effects)
    rt_text     taken, text, percent_values    (what a call in such a branch prints)
    rt_effect_options  effect_options   (what a deferred call needs to replay)
    rt_state_sets  set_state, add_state         (state a branch sets or counts: branch_state)
    rt_state    RT, check_policy                            (per-thread state)
    rt_inplace  own, in_place, set_item, by_row, write_into, mask_length, is_set, nonzero_row
                (in-place writes in branches, loops over nonzero())
    rt_unroll   unroll_count, while_count, take, put   (loops over a size from data:
                unrolled to a static bound, or a while_loop indexing by its counter)
    rt_number_lists numbers, numbers_extend, numbers_append, numbers_item, numbers_tensor   (a list of
                numbers grown from tensors: a tensor while traced; number_list)
    rt_segments split_map_cat   (split by sizes from data, mapped, concatenated: split_map)
    rt_arith    number_op, number_iop, number_unary, number_compare  (operators on reads:
                Python's rules; rt_int64 checks an int result against Python's)
    rt_number_calls  number_call, listed   (builtin, math and operator functions on reads;
                ``max``/``min``/``sum``/``len`` of a tensor's ``tolist()``)
    rt_either   number_either   (``a or b`` / ``a and b`` as a value of reads)
    rt_split    split_rest      (the rest of a function once per structure of a value)
"""

from __future__ import annotations

from .rt_arith import number_compare, number_iop, number_op, number_unary
from .rt_checks import (
    CHECK_PREFIX,
    GUARD_ERROR,
    check,
    encode_message,
    guard,
    guarded_value,
    message,
    parse_check,
)
from .rt_control import (
    arm_when,
    cond,
    go,
    keep_going,
    trip_count,
    while_over,
    while_range,
    while_true,
)
from .rt_effect_options import effect_options
from .rt_effects import (
    NESTED_LAYOUTS,
    RUNS_IN_PYTHON,
    cond_effects,
)
from .rt_either import number_either
from .rt_inplace import (
    by_row,
    in_place,
    is_set,
    mask_length,
    nonzero_index,
    nonzero_row,
    own,
    set_item,
    write_into,
)
from .rt_logical import compare_chain, logical_and, logical_not, logical_or, size_truth
from .rt_map import rows, stacked
from .rt_number_calls import listed, number_call
from .rt_number_lists import (
    numbers,
    numbers_append,
    numbers_extend,
    numbers_item,
    numbers_tensor,
)
from .rt_predicate import general_side, pred, size_pred
from .rt_segments import split_map_cat
from .rt_slices import as_int, contiguous, holds, index, length, size_numel, store_slice
from .rt_split import split_rest
from .rt_state import RT, Runtime, check_policy
from .rt_state_sets import add_state, set_item_state, set_state
from .rt_text import percent_values, taken, text
from .rt_truths import items_equal, member, truth_of
from .rt_unroll import put, runs_first, size_int, take, unroll_count, while_count
from .rt_values import (
    UNBOUND,
    extreme,
    fresh,
    is_tensor,
    scalar,
    tensor_allclose,
    tensor_equal,
)
from .rt_write_back import hold_state, write_back

__all__ = [
    "CHECK_PREFIX", "GUARD_ERROR", "NESTED_LAYOUTS", "RT", "RUNS_IN_PYTHON", "Runtime", "UNBOUND",
    "add_state", "arm_when", "as_int", "by_row", "check", "check_policy", "compare_chain", "cond",
    "cond_effects", "contiguous",
    "effect_options", "encode_message", "extreme", "fresh", "go", "guard", "guarded_value", "hold_state", "holds", "in_place", "index", "keep_going", "length", "size_numel", "store_slice",
    "is_set", "is_tensor", "items_equal", "logical_and", "logical_not", "logical_or", "mask_length", "member",
    "message",
    "nonzero_index", "nonzero_row", "number_call", "percent_values", "number_compare", "number_either", "number_iop",
    "listed", "rows", "stacked", "number_op", "number_unary", "numbers", "numbers_append", "numbers_extend", "numbers_item", "numbers_tensor", "general_side", "own", "parse_check", "pred", "scalar", "set_item",
    "runs_first", "set_item_state", "set_state", "size_int", "size_pred", "size_truth", "split_map_cat", "split_rest", "taken", "tensor_allclose", "tensor_equal", "text",
    "trip_count", "truth_of", "unroll_count", "while_over", "while_count", "take", "put",
    "while_range", "while_true", "write_back", "write_into",
]
