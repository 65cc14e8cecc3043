"""torch.export.save refuses a program whose torch.cond arm sums sizes with Python's ``sum``.

Dynamo traces the arm and turns ``sum([1, n])`` over SymInts into ``torch.sym_sum``; the
serializer's list of symbolic ops (``_SYM_OPS`` in ``torch/_export/serde/serialize.py``) has
no ``sym_sum``, so saving fails: "SerializeError: Failed serializing node cond ... op
<function sym_sum> is not in _SYM_OPS". No stitch involved. stitch rewrites the node as a
chain of ``operator.add`` (``stitch/lower/sym_ops.py``). Run: python experiments/repro_sym_sum_save.py
"""

import io

import torch


class M(torch.nn.Module):
    def forward(self, x, k):
        def true_fn(x, k):
            n = k.item()
            return x[: sum([1, n])].sum().reshape(1) + 1

        def false_fn(x, k):
            return x[:1].sum().reshape(1) - 1

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x, k))


if __name__ == "__main__":
    ep = torch.export.export(M(), (torch.randn(8), torch.tensor(3)))
    try:
        torch.export.save(ep, io.BytesIO())
        print(f"torch {torch.__version__}: saved (fixed upstream)")
    except Exception as e:  # noqa: BLE001 - the failure is what this shows
        print(f"torch {torch.__version__}: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
