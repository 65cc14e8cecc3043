"""Regional lowering on the repro's graph (``repro_aoti_cond_item.py``): ``auto`` over its
two examples with Inductor (which fails on the whole graph), ``regional`` and ONNX Runtime;
prints the decision table and which pieces ran compiled.

Usage: python experiments/regional_timing.py [repeats]   (about half a minute; default 50)
"""

from __future__ import annotations

import sys

import torch
from repro_aoti_cond_item import FramesOffset

import stitch


def main(repeats: int) -> None:
    model, grid = FramesOffset(), torch.tensor([[2, 3], [1, 4]])
    program = stitch.export(model, (grid,),
                            examples=[((torch.tensor([[1, 5], [3, 2]]),), {})])
    compiled = stitch.compile(program, "auto", repeats=repeats,
                              candidates=["inductor", "regional", "onnxruntime"])
    print(compiled.decision)
    regional = next(c for c in compiled.decision.candidates if c.backend == "regional")
    print("regional:", regional.checked)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
