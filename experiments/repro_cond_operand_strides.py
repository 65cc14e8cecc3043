"""Inductor compiles a cond's arms for their operands' traced strides, but lays the operands
out as it likes: the arm's entry check fails on every call.

Scores written into a zero tensor, viewed and transposed, then updated in place (LED's and
Longformer's sliding-window attention scores) are a ``(1, 64, 16, 65)`` tensor with strides
``(66560, 65, 4160, 1)`` in eager and in the exported graph. Inductor lowers ``torch.cond``
(``ir.Switch.create``) with ``realize_input`` alone and computes that operand contiguous, while
the arm asserts the traced strides: "AssertionError: expected size 64==64, stride 1040==65 at
dim=1" (then Dynamo's fallback reports "Attempt to trace generator"). ``ir.WhileLoop.create``
requires its inputs' exact strides; the cond does not. No stitch involved. stitch gives each
operand its traced strides while it lowers (``capture/cond_operand_strides.py``).
Run: python experiments/repro_cond_operand_strides.py   (about 10 s)
"""

import torch


class TransposedScores(torch.nn.Module):
    def forward(self, x):
        z = x.new_zeros(16, 64, 65)
        z[:, :, 1:] = x[0, :, :, 1:] * 2
        y = z.view(1, 16, 64, 65).transpose(2, 1)
        y += x[0, 0, 0]
        return torch.cond(y.sum() > 0, lambda y: y.sin() + 1, lambda y: y.cos() - 1, (y,))


if __name__ == "__main__":
    x = torch.randn(1, 16, 64, 65)
    module = torch.export.export(TransposedScores(), (x,)).module()
    try:
        out = torch.compile(module, fullgraph=True, dynamic=False)(x)
        torch.testing.assert_close(out, TransposedScores()(x))
        print(f"torch {torch.__version__}: Inductor built it, same values as eager")
    except Exception as e:  # noqa: BLE001 - the failure is what this shows
        cause = e.__context__ if e.__context__ is not None else e
        print(f"torch {torch.__version__}: {type(cause).__name__}: "
              f"{str(cause).splitlines()[0][:200]}")
