"""``if <data>: break`` in a loop over layers (early exit): a flag and conds, one graph that
stops where eager stops (it broke the graph at the ``if`` and torch.export refused it)."""

import pytest
import torch

import stitch


class EarlyExit(torch.nn.Module):
    """Stops once the activations are small; what the ``if`` holds before its ``break``
    runs, and so does the rest of the body on the other side."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(4))
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        h, used = x, 0
        for _i, layer in enumerate(self.layers):  # a tuple target: the loop stays Python
            h = torch.tanh(layer(h))
            used += 1
            if h.abs().mean() < self.threshold:
                h = h * 2
                break
            h = self.norm(h) * 0.5
        return h, used

    threshold = 0.3


class CountedRange(torch.nn.Module):
    def forward(self, x):
        total = torch.zeros_like(x)
        for _ in range(6):
            total = total + x
            x = x * 0.5
            if total.sum() > 10:
                break
        return total


class TwoBreaks(torch.nn.Module):
    def forward(self, x):
        for _ in range(3):
            x = x * 2
            if x.sum() > 100:
                break
            if x.sum() < -100:
                break
        return x


def _scaled(model_cls, scales, seed=0):
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(seed))
    return [x * s for s in scales]


@pytest.mark.parametrize("threshold", [0.3, 0.9])
def test_early_exit_over_layers_is_one_graph_that_stops_where_eager_stops(threshold):
    torch.manual_seed(0)
    model = EarlyExit().eval()
    model.threshold = threshold
    xs = _scaled(EarlyExit, [0.01, 3.0, 0.2, 30.0, 1.0])
    program = stitch.export(model, (xs[0],), examples=[((xs[1],), {})])
    assert program.report.breaks_after == 0
    assert program.report.graph_ops.get("cond", 0) >= 4
    for x in xs:
        got, want = program(x), model(x)
        torch.testing.assert_close(got, want)  # the count of layers run included


def test_a_break_in_a_range_loop_stops_at_the_same_iteration():
    model = CountedRange()
    xs = _scaled(CountedRange, [0.1, 5.0, 1.0, -3.0])
    program = stitch.export(model, (xs[0].abs(),), examples=[((xs[1].abs(),), {})])
    # one cond per iteration after the first: the first runs as written (its flag is known
    # true), and an ``if <data>: break`` with nothing else in it leaves no cond of its own
    assert program.report.graph_ops == {"cond": 5}, program.report.graph_ops
    for x in xs:
        torch.testing.assert_close(program(x), model(x))


def test_two_breaks_in_one_loop_are_left_and_refused_with_the_reason():
    with pytest.raises(stitch.StitchError, match="break"):
        stitch.export(TwoBreaks(), (torch.ones(2, 2) * 10,),
                      examples=[((-torch.ones(2, 2) * 10,), {})])


class ExitPrints(torch.nn.Module):
    """Prints every layer it runs and says where it stopped: the effects run under the
    conds and the epilogue replays exactly the iterations eager ran."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))

    def forward(self, x):
        h = x
        for layer in self.layers:
            h = torch.tanh(layer(h))
            print("layer", h.abs().mean())
            if h.abs().mean() < 0.3:
                print(f"exit early at {h.abs().mean():.3f}")
                break
        return h


def test_effects_in_an_early_exit_loop_print_what_eager_prints(capsys):
    torch.manual_seed(0)
    model = ExitPrints().eval()
    xs = _scaled(ExitPrints, [0.01, 10.0, 1.0, 0.3])
    program = stitch.export(model, (xs[0],), examples=[((xs[1],), {})])
    capsys.readouterr()
    for x in xs:
        with torch.no_grad():
            want = model(x)
            eager_text = capsys.readouterr().out
            got = program(x)
        assert capsys.readouterr().out == eager_text
        torch.testing.assert_close(got, want)


class ExitInHelper(torch.nn.Module):
    """The early-exit loop in a helper method the forward calls, the test negated."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))

    def run(self, h):
        for block in self.blocks:
            h = torch.tanh(block(h))
            if not h.abs().mean() >= 0.3:
                break
        return h

    def forward(self, x):
        return self.run(x) * 2


def test_an_early_exit_in_a_helper_method_is_rewritten_too():
    torch.manual_seed(0)
    model = ExitInHelper().eval()
    xs = _scaled(ExitInHelper, [0.01, 10.0, 1.0, 0.3])
    program = stitch.export(model, (xs[0],), examples=[((xs[1],), {})])
    assert program.report.breaks_after == 0
    for x in xs:
        torch.testing.assert_close(program(x), model(x))


class ExitThenCounted(torch.nn.Module):
    """An early exit counting in a Python int, then a loop counted by a tensor: the census
    of the rewritten model reads scalars, so the loop's header is a size torch cannot
    specialize ("UserError"), still a loop to rewrite."""

    def __init__(self):
        super().__init__()
        self.l0, self.l1 = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x):
        h, n = x, 0
        for layer in (self.l0, self.l1):
            h = torch.tanh(layer(h)) + h * 0.5
            if not h.mean() > 0.0:
                n += 1
                break
        k = (h.mean() > 0).long() + 1
        for _ in range(int(k.item())):
            h = torch.tanh(h * 1.5)
        return h, n


def test_an_early_exit_then_a_tensor_counted_loop():
    torch.manual_seed(0)
    model = ExitThenCounted().eval()
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    program = stitch.export(model, (x,), examples=[((-x * 3,), {})])
    assert program.report.graph_ops.get("while_loop") == 1, program.report.graph_ops
    for scale in (1.0, -3.0, 0.01, 5.0):
        got, want = program(x * scale), model(x * scale)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]


class ReturnsTheDepth(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(4)])

    def forward(self, x):
        depth = 0
        for depth, layer in enumerate(self.layers):  # noqa: B007 - read after the loop
            x = layer(x)
            if x.abs().max() < 0.5:
                break
        return x, depth


def test_a_loop_variable_read_after_an_early_exit_is_the_one_it_broke_at():
    """The flag rewrite runs every iteration (it skips the bodies), so the loop variable
    would end at the last item: ``depth`` 3 where the model broke at 0. It is copied in each
    iteration that runs and set back after the loop: exact at every depth."""
    torch.manual_seed(0)
    model = ReturnsTheDepth().eval()
    program = stitch.export(model, (torch.tensor([100.0, 100.0]),),
                            examples=[((torch.tensor([50.0, -80.0]),), {})])
    depths = set()
    for scale in (0.01, 0.1, 0.3, 1.0, 3.0, 30.0, 300.0):
        for x in (torch.tensor([1.0, -1.0]), torch.tensor([0.5, 2.0]), torch.randn(2)):
            got, want = program(x * scale), model(x * scale)
            torch.testing.assert_close(got[0], want[0])
            assert got[1] == want[1] and isinstance(got[1], int)
            depths.add(want[1])
    assert len(depths) > 1, depths


class BoundInTheBody(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for depth, layer in enumerate(self.layers):  # noqa: B007 - read after the loop
            h = layer(x).relu()  # bound only in the body, read after the loop
            x = x + h
            if h.abs().mean() > 1.0:
                break
        return x, h, depth


def test_names_bound_only_in_the_body_are_carried_to_after_the_loop():
    torch.manual_seed(0)
    model = BoundInTheBody().eval()
    program = stitch.export(model, (torch.randn(2, 4) * 0.1,),
                            examples=[((torch.randn(2, 4) * 10,), {})])
    depths = set()
    for scale in (0.05, 0.3, 0.6, 1.0, 2.0, 5.0):
        for _ in range(3):
            x = torch.randn(2, 4) * scale
            got, want = program(x), model(x)
            torch.testing.assert_close(got[:2], want[:2])
            assert got[2] == want[2]
            depths.add(want[2])
    assert len(depths) > 1, depths
