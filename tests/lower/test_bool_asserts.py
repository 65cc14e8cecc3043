"""torch.export's range assertion on a bool read that checks another node of a cond's arm
(``lower/bool_asserts.py``): a ``while`` on data with a call in its body, lowered to one
cond per iteration, sets a flag; the program must run every input the model runs."""

from __future__ import annotations

import torch

import stitch

STATS: dict = {}


class Flagged(torch.nn.Module):
    def forward(self, x):
        h = x * 1.5
        flag = False
        k = 0
        while (h > 2.0).any() and k < 3:
            STATS["mean"] = h.mean()
            flag = True
            h = h - 1.0
            k += 1
        return h, flag


def test_a_flag_set_in_a_bounded_while_runs_on_every_input():
    model = Flagged()
    stops_by_data, never = torch.full((4, 8), 2.5), torch.full((3, 8), 0.5)
    program = stitch.export(model, (stops_by_data,), examples=[((never,), {})])
    # the counter stops the loop (the misplaced assertion checked the counter's test)
    for x in (stops_by_data, never, torch.full((2, 8), 9.0), torch.full((5, 8), 1.5)):
        want, got = model(x), program(x)
        assert torch.equal(got[0], want[0]) and got[1] == want[1]
