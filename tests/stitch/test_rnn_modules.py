"""An RNN module beside a data-dependent branch: Dynamo breaks at every nn.LSTM/GRU/RNN call
(``allow_rnn`` is off by default), torch.export traces it (aten.lstm & co). The break is
counted, needs no rewrite, and the program is one graph (the RNN call is no break that
needs a rewrite)."""

import pytest
import torch

import stitch
from stitch.plan import Action


class GatedRecurrent(torch.nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn, self.lin = rnn, torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        if h.mean() > 0:
            h = h * 2
        return self.rnn(h)[0] + h


@pytest.mark.parametrize("rnn", [torch.nn.LSTM(8, 8, 2), torch.nn.GRU(8, 8), torch.nn.RNN(8, 8)],
                         ids=["lstm", "gru", "rnn"])
def test_rnn_call_is_traced_by_export_and_the_branch_becomes_a_cond(rnn):
    torch.manual_seed(0)
    model = GatedRecurrent(rnn).eval()
    x = torch.randn(5, 2, 8)
    program = stitch.export(model, (x,), examples=[((-x,), {})])
    report = program.report
    assert report.breaks_before >= 2 and report.breaks_after == 0
    actions = {d.action for d in report.decisions}
    assert {Action.TRACED, Action.COND} <= actions, str(report)
    assert report.graph_ops.get("cond") == 1
    for xx in (x, -x, 3 * x):
        torch.testing.assert_close(program(xx), model(xx))
