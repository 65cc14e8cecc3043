"""Sizes an operator's fake kernel makes with the deprecated ``ctx.create_unbacked_symint()``
are counted from 0, not from 2, while stitch traces.

That API's ``min`` defaults to 2 (torch.compile used to specialise sizes 0 and 1), and
torch.export turns the bound into a runtime assertion. An op that calls it without a
``min`` thereby claims every result has at least two rows: torchvision's ``nms`` fake
kernel does (0.29.1), so every exported graph that runs NMS raised ``Runtime assertion
failed for expression u9 >= 2`` on an image whose NMS keeps one box — an input the model
takes. While ``sizes_from_zero()`` is active, such a call gets ``min=0``, the default of
``new_dynamic_size()`` that replaces it: the kernel's output is as large as its real
kernel makes it, no bound is claimed, no assertion is made. A ``min`` the kernel passes is
kept. The patch is re-entrant and undone when the last user leaves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch._library.fake_impl import FakeImplCtx

from .reentrant import Reentrant

_ORIGINAL = FakeImplCtx.create_unbacked_symint
_PATCH = Reentrant()


def _from_zero(self, *, min=0, max=None):  # noqa: A002 (torch's own keyword names)
    return self.new_dynamic_size(min=min, max=max)


@contextlib.contextmanager
def sizes_from_zero() -> Iterator[None]:
    with _PATCH.active((FakeImplCtx, "create_unbacked_symint", _from_zero)):
        yield
