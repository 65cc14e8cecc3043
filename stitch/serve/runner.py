"""One request through a loaded artifact: check, run graph + epilogue, name the outputs."""

from __future__ import annotations

import itertools
import logging

import numpy as np
import torch

from ..errors import ServeError
from . import logs
from .spec import ServeSpec, disable_merging

log = logging.getLogger("stitch.serve")


class RequestRunner:
    """Callable on ``{input name: numpy array}``; returns ``{output name: numpy array}``.

    The epilogue replays per request in this process; its prints and log calls become log
    records carrying the request id. A request that does not fit raises ``RequestError``;
    a model check that fails raises the model's own exception type, with its message."""

    def __init__(self, program, spec: ServeSpec) -> None:
        targets = program.epilogue.append_targets
        if targets:
            raise ServeError(
                f"the model appends to list attribute(s) {', '.join(targets)} on every call; a "
                "server has no model object to keep them and would grow them without bound "
                "across requests. Return the values as outputs instead, or run the artifact "
                "with stitch.load (loaded.targets keeps them).")
        self.program = program
        self.spec = spec
        self._ids = itertools.count(1)

    def next_id(self) -> str:
        return f"srv-{next(self._ids)}"

    def __call__(self, arrays: dict, request_id: str | None = None) -> dict:
        with logs.request(request_id or self.next_id()):
            args, kwargs = self.spec.bind(arrays)
            with torch.inference_mode():
                out = self.program.call(args, kwargs, printer=logs.log_print)
            return self.spec.unbind(out)

    def run_merged(self, requests: list[dict], request_ids: list[str]) -> list[dict]:
        """Several requests as one call along the batch dim (only when batching allows)."""
        if len(requests) == 1 or not self.spec.batching.dynamic_batching:
            return [self(r, i) for r, i in zip(requests, request_ids, strict=True)]
        sizes = [next(iter(r.values())).shape[0] for r in requests]
        merged = {name: np.concatenate([r[name] for r in requests]) for name in requests[0]}
        out = self(merged, "+".join(request_ids))
        bounds = np.cumsum([0, *sizes])
        return [{k: v[bounds[i]:bounds[i + 1]] for k, v in out.items()}
                for i in range(len(requests))]

    def probe_row_independence(self, seed: int = 0) -> None:
        """Before merging requests, check on random rows that a row's output does not depend
        on the other rows of the batch; if it does, merging is turned off (and said why)."""
        batching = self.spec.batching
        if not batching.dynamic_batching:
            return
        g = np.random.default_rng(seed)
        low = max(1, self.spec.inputs[0].ranges.get("0", [1, None])[0] or 1)
        rows = max(2, low)
        batch = {s.name: _random(g, s, rows) for s in self.spec.inputs}
        try:
            whole = self(batch, "probe")
            alone = [self({k: v[i:i + 1] for k, v in batch.items()}, "probe")
                     for i in range(rows)] if low <= 1 else None
        except Exception as e:  # noqa: BLE001 - any failure means: do not merge
            self._no_merge(f"requests are not merged: the row-independence probe failed "
                           f"({type(e).__name__}: {e})")
            return
        if alone is None:
            self._no_merge(f"requests are not merged: the artifact needs batches of at least "
                           f"{low}, so a single row cannot be compared")
            return
        for i, single in enumerate(alone):
            for name, value in single.items():
                if not np.allclose(whole[name][i:i + 1], value, rtol=1e-4, atol=1e-5):
                    self._no_merge(f"requests are not merged: output {name} of row {i} "
                                   "changes with the other rows of the batch")
                    return

    def _no_merge(self, why: str) -> None:
        spec = self.spec
        self.spec = ServeSpec(spec.inputs, spec.outputs, spec.constants,
                              disable_merging(spec.batching, why))
        log.warning(why)


def _random(g, spec, rows: int):
    shape = [rows, *[d if d >= 0 else 2 for d in spec.shape[1:]]]
    if spec.dtype.startswith("torch.float"):
        return g.standard_normal(shape).astype(spec.numpy_dtype)
    if spec.dtype == "torch.bool":
        return g.integers(0, 2, shape).astype(np.bool_)
    return g.integers(0, 8, shape).astype(spec.numpy_dtype)
