"""An output class that warns in its constructor warns once per call of the program, as the
model does: the program's output rebuild says it, and the epilogue does not say it again
(``epilogue/rebuilt.py``)."""

from __future__ import annotations

import dataclasses
import warnings

import torch

import stitch


@dataclasses.dataclass
class OldOutput:
    """A deprecated output class, as diffusers' ``Transformer2DModelOutput`` is."""

    sample: torch.Tensor

    def __post_init__(self):
        warnings.warn("OldOutput is deprecated; use NewOutput", FutureWarning, stacklevel=2)


class Old(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            warnings.warn("a positive batch", UserWarning, stacklevel=1)
        return OldOutput(sample=self.lin(x))


def _warned(fn, x) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(x)
    return sorted(str(w.message) for w in caught)


def test_a_warning_of_the_output_class_is_given_once_per_call():
    model = Old()
    positive, negative = torch.ones(2, 4), -torch.ones(2, 4)
    program = stitch.export(model, (positive,), examples=[((negative,), {})])
    for x in (positive, negative, torch.randn(2, 4)):
        assert _warned(program, x) == _warned(model, x)
        torch.testing.assert_close(program(x).sample, model(x).sample)
