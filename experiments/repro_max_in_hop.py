"""torch 2.14, stitch-free: ``max`` of two symbolic ints inside a ``torch.cond`` arm gives
their minimum under non-strict ``torch.export``.

Non-strict export rebinds ``builtins.max`` to ``functools.partial(_tensor_min_max,
real_callable=max, tensor_callable=torch.maximum)`` (``torch/_export/non_strict_utils.py``),
which picks ``torch.sym_max`` when ``tensor_callable is torch.maximum``. A cond's arm is
traced by Dynamo, where that identity test is false, so ``sym_min`` is taken. Eager and the
top level of the trace give the maximum. Run: ``.venv/bin/python experiments/repro_max_in_hop.py``.
"""

import torch


class M(torch.nn.Module):
    def forward(self, x, n):
        def taken(x, n):
            a, b = n.tolist()
            return x * max(a, b)

        def other(x, n):
            return x.clone()

        return torch.cond(x.sum() > 0, taken, other, (x, n))


if __name__ == "__main__":
    x, n = torch.ones(3), torch.tensor([2, 5])
    program = torch.export.export(M(), (x, n), strict=False)
    print(torch.__version__, "eager:", M()(x, n).tolist(), "exported:",
          program.module()(x, n).tolist())
