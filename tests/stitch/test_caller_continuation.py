"""A branch whose sides give a returned name values of different kinds (a mask on one side,
``None`` on the other: FSMT's ``make_padding_mask``, Bamba's ``_update_mamba_mask``) takes
the rest of its callers into each arm, frame by frame (continuation across the return)."""

from __future__ import annotations

import ast
import textwrap

import pytest
import torch
from kept_rows import KeepsRows, SplitsByKeptCounts, regroup_rows, some_and_none
from torch import nn

import stitch
from stitch.plan import Action
from stitch.synthesize import RewriteContext
from stitch.synthesize.convert.caller_continuation import calls_with_rest, returns_to_continuation


def make_mask(ids, pad=1):
    mask = ids.eq(pad)
    if not mask.any():
        mask = None
    return mask


def prepare(ids, mask=None, pad=1):
    """Two frames up from the branch, the call inside a plain ``if`` block (FSMT's shape)."""
    if mask is None:
        mask = make_mask(ids, pad)
    else:
        mask = mask.eq(0)
    causal = torch.ones(ids.shape[1], ids.shape[1]).triu(1).bool()
    return ids, mask, causal


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, h, key_padding_mask=None):
        scores = self.proj(h) @ h.transpose(1, 2)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, :], -1e4)
        return scores.softmax(-1) @ h


class TwoFramesUp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.attn = Attention()

    def forward(self, ids, use_cache: bool = False):
        if not use_cache:
            ids, mask, causal = prepare(ids)
        else:
            mask, causal = None, None
        h = self.embed(ids)
        h = self.attn(h, mask)
        return h.sum(-1), causal


class MethodCallee(nn.Module):
    """The callee a method, its condition a Python test ``or`` a tensor's (Bamba's shape)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def _state_mask(self, attention_mask, step):
        state_mask = attention_mask
        if step > 0 or (attention_mask is not None and torch.all(attention_mask == 1)):
            state_mask = None
        return state_mask

    def forward(self, h, attention_mask):
        state_mask = self._state_mask(attention_mask, 0)
        h = self.lin(h)
        if state_mask is not None:
            h = h * state_mask[..., None]
        return h.cumsum(1)


def _ids(pad: bool) -> torch.Tensor:
    ids = torch.tensor([[2, 3, 4, 5, 6], [7, 8, 9, 10, 11]])
    if pad:
        ids[1, 3:] = 1
    return ids


def _one_cond(program) -> int:
    graph = program.exported_program.graph_module
    return sum(1 for n in graph.graph.nodes
               if n.op == "call_function" and "cond" in str(n.target))


def test_the_rest_of_two_callers_goes_into_each_arm():
    torch.manual_seed(0)
    model = TwoFramesUp().eval()
    program = stitch.export(model, (_ids(False),), examples=[((_ids(True),), {})])
    assert _one_cond(program) == 1
    lifted = [d for d in program.report.decisions if "across the return" in d.reason]
    assert {d.function for d in lifted} == {"prepare", "TwoFramesUp.forward"}
    assert all(d.action == Action.COND for d in lifted)
    for pad in (False, True):  # the None side and the mask side
        torch.testing.assert_close(program(_ids(pad)), model(_ids(pad)))


def test_a_method_callee_with_a_python_test_in_its_condition():
    torch.manual_seed(0)
    model = MethodCallee().eval()
    h = torch.randn(2, 5, 8)
    ones, holes = torch.ones(2, 5), torch.ones(2, 5)
    holes[0, 3:] = 0
    program = stitch.export(model, (h, ones), examples=[((h, holes), {})])
    assert _one_cond(program) == 1
    for mask in (ones, holes):
        torch.testing.assert_close(program(h * 2, mask), model(h * 2, mask))


class InALoop(nn.Module):
    """The call inside a loop: its rest is the rest of the loop, not of the function."""

    def forward(self, ids):
        total = torch.zeros(())
        for _ in range(2):
            mask = make_mask(ids)
            total = total + (0 if mask is None else mask.sum())
        return total


def test_a_call_inside_a_loop_stays_refused():
    with pytest.raises(stitch.GuardsRefusedError, match="make_mask") as refused:
        stitch.export(InALoop(), (_ids(False),), examples=[((_ids(True),), {})])
    assert "the call sits in a `for` block" in str(refused.value)


def _rewritten(source: str, **ctx_fields) -> str:
    func = ast.parse(textwrap.dedent(source)).body[0]
    ctx = RewriteContext(filename="<test>", qualname=func.name, sites={},
                         dependent_lines=set(), **ctx_fields)
    returns_to_continuation(func, ctx)
    calls_with_rest(func, ctx)
    _rewritten.decisions = ctx.decisions
    return ast.unparse(func)


def test_the_rest_binds_what_it_reads_at_the_call():
    out = _rewritten("""
        def forward(self, x, y):
            z = x + 1
            if y is None:
                m = helper(x, z)
            else:
                m = y
            return self.f(m, z) + w
        """, rest_calls={5: "helper"})
    assert "def __stitch_rest_5(__stitch_v__, self=self, z=z):" in out
    assert "m = __stitch_v__" in out
    assert "return helper(x, z, __stitch_k__=__stitch_rest_5)" in out
    assert out.count("return self.f(m, z) + w") == 2  # in the rest, and after the if


def test_a_callee_returns_through_its_callers_continuation():
    out = _rewritten("""
        def helper(x):
            if x is None:
                return
            x = x + 1
        """, takes_rest=True)
    assert "def helper(x, *, __stitch_k__=None):" in out
    assert out.count("__stitch_k__(None) if __stitch_k__ is not None else None") == 2


def test_a_call_inside_a_larger_expression_splits_it_in_evaluation_order():
    out = _rewritten("""
        def forward(self, x, h):
            m = torch.cat([self.proj(h), h, helper(x).flatten(1), self.tail(h)], 1)
            return m
        """, rest_calls={3: "helper"})
    # what ran before the call is bound first, in order; a local name needs no binding
    assert out.index("__stitch_pre_3_0 = torch.cat") < out.index(
        "__stitch_pre_3_1 = self.proj(h)") < out.index("def __stitch_rest_3")
    assert ("m = __stitch_pre_3_0([__stitch_pre_3_1, h, __stitch_v__.flatten(1), "
            "self.tail(h)], 1)") in out  # what runs after the call stays after it
    assert "return helper(x, __stitch_k__=__stitch_rest_3)" in out


@pytest.mark.parametrize(("statement", "bound", "resumed"), [
    # a keyword argument; the callee's receiver another module than self
    ("m = net.head(h, mask=helper(x))", ["__stitch_pre_3_0 = net.head"],
     "m = __stitch_pre_3_0(h, mask=__stitch_v__)"),
    ("m = {'a': self.a(h), 'b': helper(x)}", ["__stitch_pre_3_0 = self.a(h)"],
     "m = {'a': __stitch_pre_3_0, 'b': __stitch_v__}"),
    ("m = self.table[helper(x)]", ["__stitch_pre_3_0 = self.table"],
     "m = __stitch_pre_3_0[__stitch_v__]"),
    # a global the callee could rebind is read first; a local it cannot is not
    ("m = SCALE * h * helper(x)", ["__stitch_pre_3_0 = SCALE * h"],
     "m = __stitch_pre_3_0 * __stitch_v__"),
    ("m = h * helper(x)", [], "m = h * __stitch_v__"),
    ("m = f(*self.parts(h), **helper(x))", ["__stitch_pre_3_0 = f", "__stitch_pre_3_1 = self.parts(h)"],
     "m = __stitch_pre_3_0(*__stitch_pre_3_1, **__stitch_v__)"),
])
def test_each_operand_before_the_call_is_bound_in_order(statement, bound, resumed):
    out = _rewritten(f"""
        def forward(self, x, h, net):
            {statement}
            return m
        """, rest_calls={3: "helper"})
    lines = [ln.strip() for ln in out.splitlines()]
    assert [ln for ln in lines if ln.startswith("__stitch_pre_")] == bound
    assert resumed in lines and "return helper(x, __stitch_k__=__stitch_rest_3)" in lines


@pytest.mark.parametrize("statement", ["m = a and helper(x)", "m = helper(x) if a else 1",
                                       "m = a < x < helper(x)", "m = f'{helper(x)}'"])
def test_a_call_evaluated_only_on_some_paths_is_left(statement):
    out = _rewritten(f"""
        def forward(x, a):
            {statement}
            return m
        """, rest_calls={3: "helper"})
    assert "__stitch_rest_" not in out
    (left,) = _rewritten.decisions
    assert left.action == Action.LEFT and "assign its value to a name first" in left.reason


LOG = []


def noted(t):
    LOG.append("before")  # runs before the callee, as written: the rest must not rerun it
    return t


class RegroupsInsideAnExpression(KeepsRows):
    """The callee's value used inside a larger expression, after operands that run first."""

    def forward(self, x):
        h = self.lin(x)
        rows = h[(h[:, 0] > 0).nonzero()[:, 0]][:3]
        n = rows.shape[0]
        return torch.cat([noted(self.lin(rows)), regroup_rows(rows).reshape(n, 6)], 1) * 2


def test_the_rest_of_a_larger_expression_goes_into_each_arm():
    model = RegroupsInsideAnExpression()
    x, none_kept = some_and_none(model.lin)
    program = stitch.export(model, (x,), examples=[((none_kept,), {})])
    assert _one_cond(program) == 1 and program.report.graphs_after == 1
    for v in (x, none_kept, -x):
        LOG.clear()
        with torch.no_grad():
            got = program(v)
        ran = list(LOG)
        LOG.clear()
        with torch.no_grad():
            want = model(v)
        assert got.shape == want.shape and torch.equal(got, want)
        assert ran == LOG == ["before"]


# -- what the rest cannot carry: refused, not wrong ----

class ClosureBeforeTheCall(nn.Module):
    def forward(self, ids):
        bias = 0.0

        def shift(t):
            return t + bias

        mask = make_mask(ids)
        if mask is None:
            bias = 1.0  # the closure reads forward's cell, not the rest's parameter
        return shift(ids.float()).sum(-1)


class WalrusInTheCall(nn.Module):
    def forward(self, ids):
        p = 5
        mask = make_mask(ids, pad=(p := 1))
        return ids.float().sum(-1) + p + (0 if mask is None else mask.float().sum())


@torch.no_grad()
def decorated_mask(ids):
    mask = ids.eq(1)
    if not mask.any():
        mask = None
    return mask


class DecoratedCallee(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(5, 5)

    def forward(self, ids):
        mask = decorated_mask(ids)
        y = self.lin(ids.float())  # would run under the callee's no_grad
        return y if mask is None else y.masked_fill(mask, 0.0)


class NoGradBlockInTheRest(DecoratedCallee):
    def forward(self, ids):
        mask = make_mask(ids)
        with torch.no_grad():
            y = self.lin(ids.float())
        return y if mask is None else y.masked_fill(mask, 0.0)


@pytest.mark.parametrize("model", [ClosureBeforeTheCall(), WalrusInTheCall(),
                                   DecoratedCallee(), NoGradBlockInTheRest()],
                         ids=lambda m: type(m).__name__)
def test_a_rest_that_cannot_be_carried_is_refused(model):
    with pytest.raises(stitch.StitchError):
        stitch.export(model, (_ids(False),), examples=[((_ids(True),), {})])


class AssertInTheRest(nn.Module):
    def forward(self, ids):
        mask = make_mask(ids)
        h = ids.float() if mask is None else ids.float().masked_fill(mask, -100.0)
        assert h.sum() > 0, "too negative"
        return h * 2


class PassesItOn(nn.Module):
    """A frame that only returns the callee's value passes the continuation on."""

    def forward(self, ids):
        kept = [t for t in (1, 2)]  # a comprehension's variable is no name of forward's
        mask = _relay(ids)
        return self.scaled(mask) * kept[0]

    def scaled(self, mask):
        return torch.zeros(()) if mask is None else mask.float().sum()


def _relay(ids):
    return make_mask(ids)


def test_an_assert_in_the_rest_raises_the_models_exception():
    model = AssertInTheRest()
    program = stitch.export(model, (_ids(False),), examples=[((_ids(False) + 1,), {})])
    torch.testing.assert_close(program(_ids(False)), model(_ids(False)))
    with pytest.raises(AssertionError, match="too negative"):
        program(_ids(True))


def test_a_tail_call_passes_the_continuation_on():
    model = PassesItOn()
    program = stitch.export(model, (_ids(False),), examples=[((_ids(True),), {})])
    for pad in (False, True):
        torch.testing.assert_close(program(_ids(pad)), model(_ids(pad)))



def test_the_rest_reads_counts_known_only_at_run_time():
    # torch.cond's Dynamo pass lifts the counts the rest closes over (torch.export, not
    # strict); each arm's assertions on them (the reshape's `2*n != 0`) stay in that arm
    model = SplitsByKeptCounts()
    x, none_kept = some_and_none(model.lin)
    program = stitch.export(model, (x,), examples=[((none_kept,), {})])
    assert _one_cond(program) == 1 and program.report.graphs_after == 1
    for v in (x, none_kept, -x, x * 3):
        with torch.no_grad():
            got, want = program(v), model(v)
        assert got.shape == want.shape and torch.equal(got, want)
    with torch.no_grad():
        assert model(none_kept).shape[0] == 0 and model(x).shape[0] > 0


def test_this_torch_has_the_flag_and_tracer_the_lifting_uses():
    from stitch.synthesize.operators import rt_lift

    assert rt_lift.available()


class ReshapesByBatch(KeepsRows):
    """Both arms of a data-dependent test read a batch size the examples vary: a backed
    symbolic int (not a count from data) reaching the arms as an operand."""

    def forward(self, x):
        n = x.shape[0]
        h = self.lin(x)
        if h[:, 0].sum() > 0:
            out = h.reshape(n, 3, 2) * 2
        else:
            out = h.reshape(n, 2, 3).transpose(1, 2)
        return out.flatten(1)[:, : n % 4 + 1]


def test_the_arms_read_a_batch_size_the_examples_vary():
    model = ReshapesByBatch()
    taken = {n: some_and_none(model.lin, rows=n)[1] for n in (3, 5, 7, 9)}  # false side
    program = stitch.export(model, (-taken[5],), examples=[((taken[5],), {}),
                                                            ((-taken[7],), {})])
    assert _one_cond(program) == 1 and program.report.graphs_after == 1
    assert "dynamic dimensions" in str(program.report)
    with torch.no_grad():  # -none_kept takes the true side, none_kept the false one
        assert {bool(model.lin(v)[:, 0].sum() > 0) for v in (-taken[5], taken[5])} == {
            True, False}
    for v in (*taken.values(), *(-t for t in taken.values()), torch.randn(11, 6)):
        with torch.no_grad():
            got, want = program(v), model(v)
        assert got.shape == want.shape and torch.equal(got, want)


def test_the_untaken_side_of_a_branch_copied_into_the_caller_is_forced_in_the_model():
    """The branch's cond sits in the caller's copy of the callee's rest; forcing it runs
    the callee's own ``if`` with its test replaced (one test, wherever stitch copied it)."""
    program = stitch.export(AssertInTheRest(), (_ids(False),),
                            examples=[((_ids(False) + 1,), {})])
    assert any("1 checked against the model's own code" in n for n in program.report.notes)
