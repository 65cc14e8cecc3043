"""torch.cond's training-time schema check, made once per cond while stitch traces.

When grad is on and an operand requires grad (a parameter the arms read), ``torch.cond``'s
autograd entry (``HigherOrderOperator.py_autograd_impl`` in torch/_ops.py, torch 2.14.1)
builds the cond's schema (``CondOp.gen_schema``) to refuse arms that write an operand in
place: it traces both arms again with ``make_fx`` for that alone, on every call. A cond
stitch emits while torch.export traces is called that way twice (Dynamo's fake run of the
cond, then the export's run of Dynamo's graph), and a census's conds once more; for a model
with a cond per layer that was about a sixth of the export's time.

The same refusal is made before: every such cond reaches torch through Dynamo (``torch.cond``
outside Dynamo compiles itself with it; under Dynamo, the census, it is Dynamo's own), and
Dynamo's cond refuses an arm that writes its inputs or returns an alias of one whenever grad
is on (``CondHigherOrderVariable``: ``supports_input_mutation = not
torch.is_grad_enabled()``), with grad on or not for any operand. So while
``cond_schema_checked_once()`` is active, the second check is not made
(``_supports_training_input_mutation`` set on torch's cond operator, which that entry reads
first). Running a program is unaffected: stitch's runs (verification, deployment) are under
``torch.no_grad()``, and a user's run with grad on is outside the context, where torch
checks as always. The patch is re-entrant and undone when the last user leaves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .reentrant import Reentrant

_PATCH = Reentrant()
_FLAG = "_supports_training_input_mutation"


def _cond_operator():
    """torch's cond operator, where this torch has the flag its autograd entry reads."""
    try:
        from torch._higher_order_ops.cond import cond_op
    except ImportError:
        return None
    return cond_op if isinstance(getattr(cond_op, _FLAG, None), bool) else None


@contextlib.contextmanager
def cond_schema_checked_once() -> Iterator[None]:
    op = _cond_operator()
    if op is None:  # another torch: it checks as it does
        yield
        return
    with _PATCH.active((op, _FLAG, True)):
        yield
