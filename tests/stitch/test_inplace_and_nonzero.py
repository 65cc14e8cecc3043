"""In-place tensor writes inside data-dependent branches, loops over ``nonzero()``
(mixture-of-experts dispatch), the exact shims, and inputs a forward writes in place."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stitch
from stitch.errors import VerificationError
from stitch.synthesize.operators import rt_state, runtime, shims
from stitch.synthesize.operators.shims import shimmed
from tests.zoo import fuzz


class InPlaceInBranches(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("acc", torch.zeros(4))

    def forward(self, x):
        out = x.unsqueeze(1).repeat(1, 3)
        view = out[:2]  # an alias: it sees the in-place writes, in eager and in the graph
        if x.sum() > 0:
            out.add_(1)
            self.acc[0] = x.sum()
            out[1] += 5
        else:
            out.mul_(2)
            if x.mean() < -1:  # nested: the inner cond's write-back is lifted to the outer
                out.index_add_(0, torch.tensor([0]), torch.ones(1, 3))
        return view.clone(), out


X = torch.tensor([0.5, -1.0, 2.0, 0.25])


def _same_run(program, model, inputs):
    for x in inputs:
        torch.testing.assert_close(program(x), model(x))
        torch.testing.assert_close(dict(program._module.named_buffers())["model.acc"],
                                   model.acc)


def test_in_place_writes_in_branches_are_carried_and_written_back():
    model = InPlaceInBranches()
    program = stitch.export(model, (X,), examples=[((-X - 3,), {})])
    conds = [d for d in program.report.decisions if d.action.value == "torch.cond"]
    assert len(conds) == 2 and all("written in place, copied back: out" in d.reason
                                   for d in conds)
    _same_run(program, InPlaceInBranches(), [X, -X, -X - 3, X])


class WritesItsInput(nn.Module):
    def forward(self, x, out):
        if x.sum() > 0:
            out.add_(1)
        else:
            out.mul_(2)
        return x * 2


def test_an_input_written_in_a_branch_is_written_by_the_program_too():
    out = torch.randn(3)
    program = stitch.export(WritesItsInput(), (X, out.clone()), examples=[((-X, out.clone()),
                                                                            {})])
    for x in (X, -X):
        mine, theirs = out.clone(), out.clone()
        torch.testing.assert_close(program(x, mine), WritesItsInput()(x, theirs))
        torch.testing.assert_close(mine, theirs)


def test_verification_compares_what_the_forward_wrote_into_its_inputs(monkeypatch):
    """Sabotage: the program forgets the write into the input; outputs still agree, only the
    comparison of the inputs after the call can see it."""
    write_into = runtime.write_into

    def forgets_while_exporting(original, new, *same_shape):
        if torch.compiler.is_dynamo_compiling() or rt_state.is_tracing():
            return new
        return write_into(original, new, *same_shape)

    monkeypatch.setattr(runtime, "write_into", forgets_while_exporting)
    with pytest.raises(VerificationError, match="input tensor 1, written in place"):
        stitch.export(WritesItsInput(), (X, torch.randn(3)))


class RebindsAndWrites(nn.Module):
    """``out`` is written in place on one side and rebound on the other (and written, then
    rebound, on the first): ``keep`` and the caller's input see exactly eager's writes."""

    def forward(self, x, out):
        keep = out[:2]
        if x.sum() > 0:
            out.add_(1)  # reaches the caller's tensor...
            out = out * 3  # ...then the name moves on
        elif x.mean() < -0.5:
            out += x  # Tensor.__iadd__: in place on the caller's tensor too
        else:
            out = out - 1
        return out * 1.0, keep * 1.0


def test_a_name_rebound_and_written_in_place_carries_the_original_apart():
    inputs = [X, -X - 1, -X * 0.1]
    program = stitch.export(RebindsAndWrites(), (X, torch.zeros(4)),
                            examples=[((x, torch.zeros(4)), {}) for x in inputs[1:]])
    assert any("the object `out` held before the if (written in place)" in d.reason
               for d in program.report.decisions)
    for x in inputs:
        mine, theirs = torch.ones(4), torch.ones(4)
        torch.testing.assert_close(program(x, mine), RebindsAndWrites()(x, theirs))
        torch.testing.assert_close(mine, theirs)


class ViewsAndLoopsInTheArm(nn.Module):
    """Views taken inside the arm see its writes; a loop that may rebind the name comes
    before a write, so which object that write reaches depends on the run (as in eager)."""

    def forward(self, x, out):
        if x.sum() > 0:
            inner = out[:2]
            out[0] = out[1] * 2.0
            print("inner", inner.sum())
            for _ in range(int(x.numel() > 3)):
                out = out * 2
            out.add_(1)
        else:
            out += 1
            if x.mean() < -0.5:  # nested: its write-back writes the outer arm's copy
                out.mul_(3)
        return out * 1.0


def test_views_loops_and_nested_writes_in_an_arm_behave_as_in_eager(capsys):
    inputs = [X, -X - 1, -X * 0.1]
    program = stitch.export(ViewsAndLoopsInTheArm(), (X, torch.zeros(4)),
                            examples=[((x, torch.zeros(4)), {}) for x in inputs[1:]])
    capsys.readouterr()
    for x in inputs:
        mine, theirs = torch.ones(4), torch.ones(4)
        got = program(x, mine)
        printed = capsys.readouterr().out
        torch.testing.assert_close(got, ViewsAndLoopsInTheArm()(x, theirs))
        assert printed == capsys.readouterr().out
        torch.testing.assert_close(mine, theirs)


class Experts(nn.ModuleDict):
    """transformers' dispatch (Switch, Mixtral-style): a Python loop over the experts some
    token was routed to, a module looked up by the expert's index, an in-place index_add_."""

    def __init__(self, n: int = 4, d: int = 8) -> None:
        super().__init__()
        for i in range(n):
            self[f"expert_{i}"] = nn.Linear(d, d)
        self.calls: list[int] = []

    def forward(self, h, sel, w):
        final = torch.zeros_like(h)
        mask = sel.permute(2, 1, 0)
        hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in hit:
            idx, top_x = torch.where(mask[expert_idx].squeeze(0))
            cur = h[None, top_x].reshape(-1, h.shape[-1])
            out = self[f"expert_{expert_idx[0]}"](cur) * w[top_x, idx, None]
            final.index_add_(0, top_x, out.to(h.dtype))
        return final


class ListedExperts(nn.Module):
    """transformers 4.52's Mixtral-style dispatch: the expert list indexed by the row."""

    def __init__(self, n: int = 4, d: int = 8) -> None:
        super().__init__()
        self.experts = nn.ModuleList(nn.Linear(d, d) for _ in range(n))

    def forward(self, h, sel, w):
        final = torch.zeros_like(h)
        expert_mask = sel.permute(2, 1, 0)
        for expert_idx in torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero():
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            out = expert_layer(h[top_x]) * w[top_x, idx, None]
            final.index_add_(0, top_x, out)
        return final


class MoE(nn.Module):
    def __init__(self, experts: type = Experts) -> None:
        super().__init__()
        self.router = nn.Linear(8, 4)
        self.experts = experts()

    def forward(self, h):
        self.router = self.router.to(torch.float32)  # a no-op conversion (the shim's case)
        p = self.router(h).softmax(-1)
        sel = nn.functional.one_hot(p.argmax(-1), 4).view(-1, 1, 4)
        return self.experts(h, sel, p.max(-1).values.view(-1, 1))


@pytest.mark.parametrize("experts", [Experts, ListedExperts])
def test_moe_dispatch_over_nonzero_is_one_exact_sparse_graph(experts):
    torch.manual_seed(0)
    model, h = MoE(experts), torch.randn(6, 8)
    program = stitch.export(model, (h,), examples=[((torch.randn(6, 8),), {})])
    assert program.report.graphs_after == 1
    reasons = [d.reason for d in program.report.decisions]
    assert any(r.startswith("loop over nonzero()") for r in reasons)
    graph = program.exported_program.graph_module
    assert "nonzero" not in graph.code  # no host sync, no data-dependent loop length
    conds = [n for n in graph.graph.nodes if n.target is torch.ops.higher_order.cond]
    assert len(conds) == 4  # one per expert: an unselected expert runs the empty side
    one_expert = torch.randn(1, 8).repeat(6, 1)  # every token routed alike
    for x in (h, torch.randn(6, 8) * 5, one_expert):
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)


def test_a_loop_over_nonzero_of_a_2d_tensor_is_refused_at_run_time():
    from stitch.synthesize.operators.rt_inplace import mask_length

    with pytest.raises(stitch.StitchError, match="1-D tensor only"):
        mask_length(torch.ones(2, 3))


def test_module_to_shim_is_a_no_op_only_when_nothing_converts():
    lin = nn.Linear(2, 2)
    with shimmed():
        assert lin.to(torch.float32) is lin and lin.to("cpu") is lin
        assert nn.Module.to is not shims._original_to
        assert lin.to(torch.float64).weight.dtype == torch.float64  # the original ran
    assert nn.Module.to is shims._original_to


class RebindsThenWrites(nn.Module):
    """The arm rebinds ``out`` first: its in-place write reaches the arm's own tensor (left as
    written, as torch.cond allows), the caller's original is untouched."""

    def forward(self, x):
        out = x * 1
        keep = out
        if x.sum() > 0:
            out = out * 3
            out.add_(1)
        return out, keep


def test_a_write_after_the_arm_rebinds_the_name_reaches_the_new_tensor():
    program = stitch.export(RebindsThenWrites(), (X,), examples=[((-X,), {})])
    for x in (X, -X):
        torch.testing.assert_close(program(x), RebindsThenWrites()(x))


class WritesThenReturns(nn.Module):
    """An early return after an in-place write: the write reaches the caller's input."""

    def forward(self, x, out):
        if x.sum() > 0:
            out.index_add_(0, torch.tensor([0]), x[:1].unsqueeze(0).expand(1, 3) * 1.0)
            return x * 2
        out[1] = -1.0
        return x - 1


def test_in_place_writes_in_a_returning_branch_reach_the_original():
    out = torch.zeros(3, 3)
    program = stitch.export(WritesThenReturns(), (X, out.clone()),
                            examples=[((-X, out.clone()), {})])
    assert any("written in place, copied back: out" in d.reason
               for d in program.report.decisions)
    for x in (X, -X):
        mine, theirs = out.clone(), out.clone()
        torch.testing.assert_close(program(x, mine), WritesThenReturns()(x, theirs))
        torch.testing.assert_close(mine, theirs)


class WritesAfterTwoReturns(nn.Module):
    """The second early return's other side writes ``out`` in place: the first's continuation
    holds that cond's write-back (a bare call, no rebinding), a write the first cond must
    carry too (torch.cond may not write its inputs)."""

    def forward(self, x, out):
        if x.sum() > 2:
            return x * 2
        if x.mean() > 0:
            return x * 3
        out[1] = -1.0
        return x - 1


def test_a_write_back_after_a_nested_return_is_carried_by_the_outer_cond():
    out = torch.zeros(3, 3)
    program = stitch.export(WritesAfterTwoReturns(), (X, out.clone()),
                            examples=[((-X, out.clone()), {}), ((X * 5, out.clone()), {})])
    for x in (X, -X, X * 5):
        mine, theirs = out.clone(), out.clone()
        torch.testing.assert_close(program(x, mine), WritesAfterTwoReturns()(x, theirs))
        torch.testing.assert_close(mine, theirs)


# a program of the fuzz generator's (tests/fuzz): a loop over nonzero() in the arm no
# example takes, a loop counted by a tensor in the other, a log call after it
FOUND_BY_FUZZER = """\
        h = torch.tanh(self.l0(x)) + x * 0.1
        if h.abs().mean().item() > 0.3 or h.mean() < -0.3:
            k2 = (h.mean() > 0).long() + 1
            for _ in range(int(k2.item())):
                h = torch.tanh(h * 1.5)
        else:
            for e3 in (h.mean(0) > 0.1).nonzero():
                h[:, e3[0]] = h[:, e3[0]] * 0.5 + self.l1.bias[e3[0]]
            logger.warning('l4 %.4f', h.sum())
        return h
"""


def test_a_loop_over_nonzero_inside_a_branch_is_one_graph(tmp_path):
    """The loop the rewrite made counts the mask's length, a static size: the branch holding
    it is one cond, not a branch refused for a loop counted by a tensor."""
    module = fuzz.load_program(fuzz.HEADER + FOUND_BY_FUZZER, str(tmp_path))
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    program = stitch.export(module.Fuzz(), (x,), examples=[((x * 4 + 2,), {})])
    assert program.report.graph_ops.get("nonzero", 0) == 0, str(program.report)
    for i in (x, x * 0.01, -x * 4 - 2):
        torch.testing.assert_close(program(i), module.Fuzz()(i))


class WritesABufferThroughALocalName(nn.Module):
    """The receiver is a local name bound to a buffer, not ``self.<attr>``: the copy is
    written back into that same object, so the buffer holds eager's values."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("acc", torch.zeros(4))

    def forward(self, x):
        buf = self.acc
        if x.sum() > 0:
            buf[0] += x.sum()
            buf.mul_(0.5)
        return x * 2


def test_a_buffer_written_through_a_local_name_in_a_branch():
    program = stitch.export(WritesABufferThroughALocalName(), (X,), examples=[((-X,), {})])
    model = WritesABufferThroughALocalName()
    for x in (X, -X, X * 3):
        torch.testing.assert_close(program(x), model(x))
        torch.testing.assert_close(dict(program._module.named_buffers())["model.acc"],
                                   model.acc)
