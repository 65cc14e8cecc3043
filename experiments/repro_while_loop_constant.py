"""Inside a ``torch.cond`` arm, ``torch.while_loop`` carrying a 0-d tensor made by
``torch.tensor(1.0)`` gives back, through ``.item()``, the value the body makes of it on the
first iteration, as a constant: torch (2.14.1) traces the arm with Dynamo, the fake tensor
of ``torch.tensor(...)`` is a constant to it, and the loop's output is read as one. The
program (and torch.cond's own eager run, which compiles the arm the same way) is wrong
wherever the loop runs another number of times. The same init made by ``torch.full((),
1.0)`` is no constant, and the result is right. No stitch code.

stitch carried a Python number through a ``while_loop`` this way (``rt_control.as_tensors``:
``float`` and ``int`` travel as 0-d tensors): the forms generator found it
(``while/nested/chained/carries-float/effect-none``: a returned scale halved by a ``while``
inside an ``if``, wrong on an input where the loop does not run). It now uses ``full``;
``tests/stitch/test_while_numbers.py`` holds the model.

Measured 2026-12-04 (torch 2.14.1+cu130; traced on an input where the loop runs once):
``torch.tensor`` init: on the input where the loop does not run, the program gives -0.25
where Python gives -0.5 (torch.cond's eager run gives -0.25 too); ``torch.full`` init:
-0.5, as Python.

Usage: python experiments/repro_while_loop_constant.py   (a few seconds)
"""

from __future__ import annotations

import torch
from torch._higher_order_ops import while_loop


def _python(x: torch.Tensor) -> torch.Tensor:
    """What the model means, in plain Python."""
    s, h = 1.0, x
    if x.max() > -5:
        while 0 < h.mean() < 1:
            s, h = s * 0.5, h - 1.0
        return h * s
    return -x


class Carried(torch.nn.Module):
    def __init__(self, make_init) -> None:
        super().__init__()
        self.make_init = make_init

    def forward(self, x):
        def true_fn(h):
            def cond_fn(s, h):
                return (h.mean() > 0) & (h.mean() < 1)

            def body_fn(s, h):
                return s * 0.5, h - 1.0

            s, h = while_loop(cond_fn, body_fn, (self.make_init(), h))
            return h * s.item()

        return torch.cond(x.max() > -5, true_fn, lambda h: -h, (x,))


def main() -> None:
    torch._dynamo.config.capture_scalar_outputs = True
    inits = {"torch.tensor(1.0)": lambda: torch.tensor(1.0, dtype=torch.float64),
             "torch.full((), 1.0)": lambda: torch.full((), 1.0, dtype=torch.float64)}
    for what, make in inits.items():
        model = Carried(make)
        ep = torch.export.export(model, (torch.full((2, 2), 0.6),), strict=False)
        x = torch.full((2, 2), -0.5)  # the loop does not run
        print(f"{what}: program {ep.module()(x)[0, 0].item()}, "
              f"Python {_python(x)[0, 0].item()}")


if __name__ == "__main__":
    main()
