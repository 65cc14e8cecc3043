"""Which calls are prints, warnings or log calls (capture/sites.side_effect_call): a
tensor's ``x.log()`` is a logarithm, not a logger call (a branch holding it is no
"print/log/warn inside a branch")."""

from __future__ import annotations

import ast

import pytest
import torch

import stitch
from capture.sites import side_effect_call


@pytest.mark.parametrize("source, found", [
    ("x.log()", None), ("h.log().sum()", None), ("torch.log(x)", None),
    ("logger.log(logging.INFO, 'm')", "logger.log"), ("logger.log(*args)", "logger.log"),
    ("logger.info('m %s', v)", "logger.info"), ("self.log.warning(msg='m')", "logger.warning"),
    ("print(x)", "print"), ("warnings.warn('w')", "warnings.warn"),
])
def test_a_call_is_a_log_call_when_its_arguments_fit_a_logger(source, found):
    call = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call))
    assert side_effect_call(call) == found


class LogInABranch(torch.nn.Module):
    def forward(self, x):
        if x.min() > 0 and x.log().sum() > 0:
            y = x.log()
        else:
            y = -x
        return y


def test_a_tensors_logarithm_in_a_branch_and_its_test_is_one_graph():
    model = LogInABranch()
    program = stitch.export(model, (torch.tensor([1.0, 2.0]),),
                            examples=[((torch.tensor([-1.0, 2.0]),), {})])
    for x in ([3.0, 4.0], [0.5, 0.6], [-1.0, 5.0]):
        torch.testing.assert_close(program(torch.tensor(x)), model(torch.tensor(x)))
