"""Branches whose in-place writes happen inside a helper they call: the arguments the helper
writes are carried out of the cond like a write made in the branch itself (GraphMend's
``where_multi_arg`` fixture: ``combine(p1, q1, mode="x")`` on one side, ``combine(p2, q2,
mode="x")`` on the other)."""

import pytest
import torch

import stitch
from stitch.synthesize.convert.helper_effects import writing_helpers


def combine(a, b, mode="x"):
    if mode == "x":
        a.mul_(b)
    else:
        a.add_(b)


def set_first_row(target, *, value):
    target[0] = value


def through(a, b):
    combine(a, b, mode="y")  # passed on to another writing helper


def rebinds(a, b):
    a = a * b  # a new tensor: the caller's is not written
    return a


class Writers(torch.nn.Module):
    def forward(self, t, p1, q1, p2, q2):
        if t.argmax() > 0:
            combine(p1, q1, mode="x")
            set_first_row(q2, value=t[:8].sum())
        else:
            through(p2, q2)
            rebinds(p1, q1)
        return t * 2


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(8, generator=g)
    return t, *[torch.randn(4, 8, generator=g) for _ in range(4)]


def test_helper_writes_are_found_with_their_parameters():
    found = writing_helpers(Writers.forward)
    assert found == {"combine": ((0, "a"),), "set_first_row": ((0, "target"),),
                     "through": ((0, "a"),)}


@pytest.mark.parametrize("hot", [3, 0])
def test_arguments_a_helper_writes_in_a_branch_come_out_of_the_cond(hot):
    t, *ps = _inputs(0)
    t_true, t_false = t.clone(), t.clone()
    t_true[3], t_false[0] = 10.0, 10.0  # argmax 3 > 0 / argmax 0
    model = Writers()
    program = stitch.export(model, (t_true, *[p.clone() for p in ps]),
                            examples=[((t_false, *[p.clone() for p in ps]), {})])
    assert program.report.graph_ops.get("cond") == 1
    t2, *qs = _inputs(1)
    t2[hot] = 10.0
    want, got = [q.clone() for q in qs], [q.clone() for q in qs]
    torch.testing.assert_close(program(t2, *got), model(t2, *want))
    for w, g in zip(want, got, strict=True):  # the caller's tensors, written alike
        assert torch.equal(w, g)
    assert not all(torch.equal(w, q) for w, q in zip(want, qs, strict=True))


def scale_into(h, owner):
    owner.h = h
    if torch.isnan(h).any():
        owner.h = h * 2.0
    elif h.abs().max() > 2.0:
        owner.h = h - 1.0
    return h + owner.h  # reads what the branch set


class SetsThroughAParameter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.h = None

    def forward(self, x):
        return scale_into(x * 1.5, self)


def test_a_set_on_a_passed_object_some_arms_make_is_carried_to_the_read_after():
    """Only some links of the chain set it: the others carry the value the object holds.
    Replayed after the graph alone, the set would not be seen by the read after the branch
    (the program would add the old value); carried, the read sees what the model's does."""
    small, large = torch.randn(4, 8) * 0.1, torch.randn(4, 8) * 5
    nan = small.clone()
    nan[0, 0] = float("nan")
    program = stitch.export(SetsThroughAParameter(), (small,),
                            examples=[((large,), {}), ((nan,), {})])
    for x in (small * 0.5, large * 2, nan * 3):
        eager = SetsThroughAParameter()
        expected = eager(x)
        torch.testing.assert_close(program(x), expected, equal_nan=True)
        torch.testing.assert_close(program.model.h, eager.h, equal_nan=True)


def scale_both(h, owner):
    owner.h = h
    if h.abs().max() > 2.0:
        owner.h = h - 1.0
    else:
        owner.h = h * 2.0
    return h + owner.h  # reads what either arm set


class SetsOnBothSides(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.h = None

    def forward(self, x):
        return scale_both(x * 1.5, self)


class SetsThroughAClosure(torch.nn.Module):
    """The object is a closure variable of the function with the branch, not a parameter."""

    def __init__(self):
        super().__init__()
        self.h = None

    def forward(self, x):
        owner = self

        def step(h):
            owner.h = h
            if h.abs().max() > 2.0:
                owner.h = h - 1.0
            else:
                owner.h = h * 2.0
            return h + owner.h  # reads what either arm set

        return step(x * 1.5)


def scale_by_chain(h, owner):
    owner.h = h
    if (h > 0).all():
        owner.h = h * 2.0
    elif h.abs().max() > 2.0:
        owner.h = h - 1.0
    else:
        owner.h = h * 0.5
    return h + owner.h  # reads what the link taken set


class SetsOnEveryLink(torch.nn.Module):
    """An ``elif`` chain whose every link sets it: the inner branch's cond carries it, and
    the outer one carries that."""

    def __init__(self):
        super().__init__()
        self.h = None

    def forward(self, x):
        return scale_by_chain(x * 1.5, self)


@pytest.mark.parametrize("make", [SetsOnBothSides, SetsThroughAClosure, SetsOnEveryLink])
def test_a_set_on_an_outside_object_both_arms_make_is_carried_to_the_read_after(make):
    """Both arms set it, on a parameter's object or a closure variable's: the value the read
    after the branch sees is carried out of the cond (and the set is replayed after the
    graph, as the forward leaves it). Deferred only, the read would add the old value."""
    small, large, positive = torch.randn(4, 8) * 0.1, torch.randn(4, 8) * 5, torch.rand(4, 8)
    program = stitch.export(make(), (small,), examples=[((large,), {}), ((positive,), {})])
    assert any("carries `owner.h` (read after it)" in d.reason
               for d in program.report.decisions), str(program.report)
    for x in (torch.randn(4, 8) * 0.1, torch.randn(4, 8) * 5, torch.rand(4, 8) + 0.1):
        eager = make()
        expected = eager(x)
        torch.testing.assert_close(program(x), expected)
        torch.testing.assert_close(program.model.h, eager.h)


def scale_in_passes(h, owner):
    owner.h = h
    for _ in range(1 + int(h.abs().max() > 2.0)):  # one pass, or two: a cond on the second
        owner.h = h * 2.0
        h = h - 0.5
    return h + owner.h  # reads what the last pass set


class SetsInALoopOnData(torch.nn.Module):
    """The set sits in a loop whose count the data gives: unrolled, each pass past the first
    a cond whose other side sets nothing. That side carries the value the object holds,
    which the pass before gave it while the model was traced (``hold_state``)."""

    def __init__(self):
        super().__init__()
        self.h = None

    def forward(self, x):
        return scale_in_passes(x * 1.5, self)


def test_a_set_on_an_outside_object_in_a_loop_on_data_is_carried_through_the_passes():
    small, large = torch.randn(4, 8) * 0.1, torch.randn(4, 8) * 5
    program = stitch.export(SetsInALoopOnData(), (small,), examples=[((large,), {})])
    for x in (small * 0.5, large * 2, small, large):
        eager = SetsInALoopOnData()
        expected = eager(x)
        torch.testing.assert_close(program(x), expected)
        torch.testing.assert_close(program.model.h, eager.h)


def refine_while(h, owner):
    owner.h = h
    k = 0
    while (h > 0).all() and k < 3:  # a bounded while: each pass a cond inside the go flag's
        owner.h = h * 2.0
        h = h - 1.0
        k += 1
    return h + owner.h  # reads what the last pass set, or the value before the loop


class SetsInABoundedWhile(torch.nn.Module):
    """The pass's cond carries the attribute out, and the ``if`` on the loop's go flag
    around it carries it on (its other side: the value the object holds)."""

    def __init__(self):
        super().__init__()
        self.h = None

    def forward(self, x):
        return refine_while(x * 1.5, self)


def test_a_set_on_an_outside_object_in_a_bounded_while_is_carried_out_of_the_loop():
    once, twice = torch.rand(4, 8) * 0.5 + 0.1, torch.rand(4, 8) * 0.2 + 1.0
    program = stitch.export(SetsInABoundedWhile(), (once,),
                            examples=[((twice,), {}), ((-once,), {})])
    for x in (once, twice, -once, twice * 3):
        eager = SetsInABoundedWhile()
        expected = eager(x)
        torch.testing.assert_close(program(x), expected)
        torch.testing.assert_close(program.model.h, eager.h)


def by_size_then_data(h, owner):
    owner.h = h
    if h.shape[0] > 3:  # a test on sizes: a Python if until the round that makes it a cond
        owner.h = h * 2.0
    elif h.abs().max() > 2.0:
        owner.h = h - 1.0
    else:
        owner.h = h * 0.5
    return h + owner.h


class SetsUnderASizeTest(torch.nn.Module):
    """The data branch's cond carries the attribute inside the size test's other side; the
    read after the size test reads the object (which holds the value), not the carried
    name, which the size test's first side never binds."""

    def __init__(self):
        super().__init__()
        self.h = None

    def forward(self, x):
        return by_size_then_data(x * 1.5, self)


def test_a_set_carried_inside_one_side_of_a_python_if_is_read_after_it():
    examples = [torch.randn(4, 8), torch.randn(2, 8) * 0.1, torch.randn(3, 8) * 5]
    program = stitch.export(SetsUnderASizeTest(), (examples[0],),
                            examples=[((x,), {}) for x in examples[1:]])
    for rows in (2, 3, 4, 5):
        for scale in (0.1, 5.0):
            x = torch.randn(rows, 8) * scale
            eager = SetsUnderASizeTest()
            expected = eager(x)
            torch.testing.assert_close(program(x), expected)
            torch.testing.assert_close(program.model.h, eager.h)
