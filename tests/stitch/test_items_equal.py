"""``==``/``!=`` of lists or tuples of sizes in a test on sizes (rt_truths.items_equal):
Python's answer on plain values, every spelling of a shape key alike, and a SymBool, not a
guard, where the sizes are symbolic."""

from __future__ import annotations

import pytest
import torch

from stitch.synthesize.operators.rt_truths import items_equal

PAIRS = [
    ([[4, 8], [2, 4]], [[4, 8], [2, 4]]),  # a list of [h, w] per level (RT-DETR's key)
    ([[4, 8], [2, 4]], [[4, 8], [2, 5]]),
    ((4, 8), torch.Size([4, 8])),  # a tuple against an input's shape
    (torch.Size([4, 8]), (4, 9)),
    ([4, 8], (4, 8)),  # a list against a tuple: never equal in Python
    ([4, 8], [4, 8, 1]),  # lengths differ
    ([], []),
    (None, [4, 8]),  # a cache not filled yet
    (3, 3),
]


@pytest.mark.parametrize(("left", "right"), PAIRS)
def test_plain_values_compare_as_python_does(left, right):
    assert items_equal(left, right) == (left == right)
    assert items_equal(left, right, negated=True) == (left != right)


def test_symbolic_sizes_give_one_truth_without_a_guard():
    key = [[4, 8]]  # the cache's key: held by the function, as a module holds it

    def keyed(x):
        changed = items_equal(key, [[x.shape[0], x.shape[1]]], negated=True)
        return torch.cond(torch.full((), changed), lambda x: x * 2, lambda x: x + 1, (x,))

    seen = []
    compiled = torch.compile(keyed, dynamic=True, fullgraph=True,
                             backend=lambda gm, _: seen.append(gm) or gm)
    for shape in ((4, 8), (5, 8), (4, 9)):
        x = torch.randn(*shape)
        torch.testing.assert_close(compiled(x), keyed(x))
    assert len(seen) == 1  # the sizes stayed symbolic: no recompile per side
