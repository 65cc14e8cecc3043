"""Longformer's padding test, served at every length by its padding arm (one arm).

Longformer pads its input to a multiple of the attention window under
``if padding_len > 0:`` (``LongformerModel._pad_to_window_size``; its own comment says the
padded path is right at ``padding_len == 0`` too), then asserts whole windows and views
them. torch.export decides the test for the examples' lengths (multiples of 32 here), and
a cond on the size keeps no length more (its output length is a new size whose
divisibility the windows' view cannot see). stitch then tries the arm most lengths
take at every length (stitch/size_rewrite.py, synthesize/convert/one_arm.py). This script
exports the export-cost bench's Longformer as written with stitch and runs the program on
lengths no example had, against the model, with the text it logs.

    python experiments/one_arm_size_test.py [tiny|6|12]

Prints the export's time, the decision at the padding test, and per length the largest
difference and whether the logged lines match.
"""

from __future__ import annotations

import logging
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import export_cost  # noqa: E402

LENGTHS = (33, 77, 100, 128, 160)


def _said(fn, ids):
    """``fn(ids)``'s last hidden state and the transformers log lines it made."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    root = logging.getLogger("transformers")
    handler = Keep()
    root.addHandler(handler)
    once = getattr(logging.Logger, "warning_once", None)  # transformers' show-once cache:
    if once is not None:  # emptied, so each side's first padding logs (as verification does)
        once.cache_clear()
    try:
        return fn(ids)["last_hidden_state"], lines
    finally:
        root.removeHandler(handler)


def main() -> None:
    import stitch
    from stitch.plan import Action

    size = sys.argv[1] if len(sys.argv) > 1 else "tiny"
    model, ((args, kwargs), second), _ = export_cost.build("longformer", size)
    start = time.perf_counter()
    program = stitch.export(model, args, kwargs, examples=[second])
    print(f"stitch.export: {time.perf_counter() - start:.1f} s", dict(program.report.seconds))
    for d in program.report.decisions:
        if d.action == Action.ONE_ARM:
            print(f"one arm at {d.location}")
    for length in LENGTHS:
        ids = torch.randint(5, 1000, (2, length))
        try:
            got, program_said = _said(program, ids)
        except Exception as e:  # noqa: BLE001 - what the program says is the measurement
            print(f"length {length}: the program raised {type(e).__name__}: {str(e)[:160]}")
            continue
        want, model_said = _said(model, ids)
        print(f"length {length}: max abs difference {(got - want).abs().max().item()}, "
              f"logged lines {'match' if program_said == model_said else 'differ'}")


if __name__ == "__main__":
    main()
