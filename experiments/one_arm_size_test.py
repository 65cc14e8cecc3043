"""Evidence for a size-test candidate stitch does not make yet: one arm for both sides.

Longformer pads its input to a multiple of the attention window under
``if padding_len > 0:`` (``LongformerModel._pad_to_window_size``), and its own comment says
the padded path is right at ``padding_len == 0`` too. stitch's program keeps torch.export's
guard there (lengths that are multiples of 32 only): the pass that rewrites the test into a
cond on the size keeps nothing, and costs a third of the export. This script exports the
export-cost bench's Longformer with that ``if`` always taken (its source compiled again
with the test replaced by ``True``) and runs the program on lengths no example had,
against the unchanged model.

    python experiments/one_arm_size_test.py [tiny|6|12]

Measured at 3bfedad, 2 cores, one thread, one run (tiny): the export took 143 s (the model
as written: 176 s on the same machine), and the program gave the model as written's output
exactly (max abs difference 0.0) on lengths 33, 77, 100 and 128; the program of the model
as written is guarded to multiples of 32 (its report's SIZE GUARDS). Lengths up to 32 stay
refused here (a guard on the number of chunks).
"""

from __future__ import annotations

import inspect
import os
import sys
import textwrap
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import export_cost  # noqa: E402

TEST = "if padding_len > 0:"


def one_arm(ml):
    """``_pad_to_window_size`` with its padding test always true, compiled under the
    module's own file name (so stitch treats it as the library's code, as before); returns
    the method as written."""
    written = ml.LongformerModel._pad_to_window_size
    src = textwrap.dedent(inspect.getsource(written))
    if TEST not in src:
        raise SystemExit(f"this transformers has no `{TEST}` in _pad_to_window_size")
    namespace: dict = {}
    exec(compile(src.replace(TEST, "if True:"), ml.__file__, "exec"), ml.__dict__, namespace)
    ml.LongformerModel._pad_to_window_size = namespace["_pad_to_window_size"]
    return written


def main() -> None:
    from transformers.models.longformer import modeling_longformer as ml

    import stitch

    size = sys.argv[1] if len(sys.argv) > 1 else "tiny"
    model, ((args, kwargs), second), _ = export_cost.build("longformer", size)
    written = one_arm(ml)
    start = time.perf_counter()
    program = stitch.export(model, args, kwargs, examples=[second])
    print(f"stitch.export: {time.perf_counter() - start:.1f} s", dict(program.report.seconds))
    ml.LongformerModel._pad_to_window_size = written  # the model as written, compared with
    for length in (33, 77, 100, 128):
        ids = torch.randint(5, 1000, (2, length))
        try:
            got = program(ids)["last_hidden_state"]
        except Exception as e:  # noqa: BLE001 - what the program says is the measurement
            print(f"length {length}: the program raised {type(e).__name__}: {str(e)[:160]}")
            continue
        want = model(ids)["last_hidden_state"]
        print(f"length {length}: max abs difference {(got - want).abs().max().item()}")


if __name__ == "__main__":
    main()
